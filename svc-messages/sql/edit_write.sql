-- The last statement of an edit: the locked body's new text, entities, edit_date, version and
-- media (primary key of message_bodies). The outbox rows follow this item in the same statement.
edited AS (
    UPDATE message_bodies SET text = $1, entities = $2, edit_date = $3, edit_version = $4,
                              media = $6,
                              media_sha256 = CASE WHEN $7 = '' THEN media_sha256 ELSE $7 END
    WHERE id = $5
), requeued AS (
    -- Both owners' boxes are indexed again by the new text (primary key of message_bodies
    -- for its owners, as they were before this statement; primary key of search_queue).
    INSERT INTO search_queue (owner_id, body_id)
    SELECT DISTINCT o.owner_id, m.id
    FROM message_bodies m
    CROSS JOIN LATERAL (VALUES (m.sender_id), (m.recipient_id)) o(owner_id)
    WHERE m.id = $5
    ON CONFLICT DO NOTHING
)
