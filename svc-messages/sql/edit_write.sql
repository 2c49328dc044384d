-- The last statement of an edit: the locked body's new text, entities, edit_date and version
-- (primary key of message_bodies). The outbox rows follow this item in the same statement.
edited AS (
    UPDATE message_bodies SET text = $1, entities = $2, edit_date = $3, edit_version = $4
    WHERE id = $5
), requeued AS (
    -- The new text's words are indexed again (primary key of search_queue).
    INSERT INTO search_queue (body_id) VALUES ($5) ON CONFLICT DO NOTHING
)
