-- Marks one owner's boxes $2 deleted (primary key of message_boxes, the owner's partition
-- only), and queues them so that the search indexer drops their keys (primary key of
-- search_queue); returns the boxes it marked, with their dialog and side, which the events
-- name, and whether they held an unread reaction.
WITH marked AS (
    UPDATE message_boxes SET deleted = true
    WHERE owner_id = $1 AND box_id = ANY($2) AND NOT deleted
    RETURNING box_id, peer_user_id, out, body_id, reaction_unread
), queued AS (
    INSERT INTO search_queue (owner_id, body_id) SELECT $1, body_id FROM marked
    ON CONFLICT DO NOTHING
)
SELECT box_id, peer_user_id, out, reaction_unread FROM marked
