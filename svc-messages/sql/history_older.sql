-- The boxes of a dialog before a history anchor, newest first (index message_boxes_history):
-- $1 owner, $2 peer, $3 anchor id, $4 anchor date, $5 max_id bound, $6 min_id bound, $7 limit.
SELECT * FROM message_boxes
WHERE owner_id = $1 AND peer_user_id = $2 AND NOT deleted
  AND box_id < $3 AND date < $4 AND box_id < $5 AND box_id > $6
ORDER BY box_id DESC
LIMIT $7
