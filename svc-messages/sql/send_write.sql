-- The second statement of a batch of sends: the bodies and every owner's box of the sends
-- that took box ids (their keys name their bodies already), and the release of the keys of
-- sends whose reply (or its quote) was invalid (primary key of idempotency_keys), so that a
-- corrected retry may use them. The outbox rows follow these items in the same statement.
bodies AS (
    INSERT INTO message_bodies (id, sender_id, recipient_id, text, date, silent, noforwards,
                                entities, quote, fwd_from_user_id, fwd_date, fwd_msg_id,
                                fwd_saved_from_user_id, fwd_saved_from_msg_id, media,
                                media_sha256, grouped_id)
    SELECT * FROM {bodies}
), boxes AS (
    INSERT INTO message_boxes (owner_id, box_id, peer_user_id, body_id, out, reply_to_box_id, date,
                               media_unread)
    SELECT * FROM {boxes}
), queued AS (
    -- Each new box waits for the search indexer (primary key of search_queue).
    INSERT INTO search_queue (owner_id, body_id) SELECT * FROM unnest({boxes.owner_id}, {boxes.body_id})
), released AS (
    DELETE FROM idempotency_keys k
    USING {released} AS r(sender_id, random_id)
    WHERE k.sender_id = r.sender_id AND k.random_id = r.random_id
)
