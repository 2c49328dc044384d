-- The first statement of an edit: the editor's box $2 (primary key of message_boxes) and its
-- body, locked until the edit commits (primary key of message_bodies), and whether the peer of
-- the dialog blocked the editor (primary key of blocks).
SELECT b.peer_user_id,
       b.body_id,
       m.sender_id,
       m.fwd_from_user_id,
       m.text,
       m.entities,
       m.media,
       m.edit_version,
       b.peer_user_id <> b.owner_id AND EXISTS (
           SELECT 1 FROM blocks k
           WHERE k.owner_id = b.peer_user_id AND k.blocked_user_id = b.owner_id) AS blocked
FROM message_boxes b
JOIN message_bodies m ON m.id = b.body_id
WHERE b.owner_id = $1 AND b.box_id = $2 AND NOT b.deleted
FOR UPDATE OF m
