-- The first statement of a DeleteHistory batch: the owner's newest boxes of the dialog with
-- $2 that are not deleted, with ids up to $3, $4 at most (index message_boxes_history, which
-- holds no deleted box, so a dialog cleared in batches never steps over what it cleared),
-- each with whether the peer blocked the owner (primary key of blocks).
SELECT b.box_id, b.peer_user_id, b.body_id,
       b.peer_user_id <> $1 AND EXISTS (
           SELECT 1 FROM blocks k
           WHERE k.owner_id = b.peer_user_id AND k.blocked_user_id = $1) AS blocked
FROM message_boxes b
WHERE b.owner_id = $1 AND b.peer_user_id = $2 AND NOT b.deleted AND b.box_id <= $3
ORDER BY b.box_id DESC
LIMIT $4
