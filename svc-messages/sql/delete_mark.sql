-- Marks one owner's boxes $2 deleted (primary key of message_boxes, the owner's partition
-- only); returns those it marked, with their dialog and side, which the events name.
UPDATE message_boxes SET deleted = true
WHERE owner_id = $1 AND box_id = ANY($2) AND NOT deleted
RETURNING box_id, peer_user_id, out
