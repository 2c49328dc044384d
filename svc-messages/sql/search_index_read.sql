-- What the indexer reads of the claimed boxes ($1 owners, $2 bodies): each owner's box
-- (message_boxes_body) and its body's text (primary key of message_bodies).
SELECT bx.owner_id, bx.box_id, bx.peer_user_id, bx.deleted, m.text
FROM unnest($1::bigint[], $2::bigint[]) q(owner_id, body_id)
CROSS JOIN LATERAL (
    SELECT owner_id, box_id, peer_user_id, deleted FROM message_boxes
    WHERE owner_id = q.owner_id AND body_id = q.body_id
    LIMIT 1
) bx
CROSS JOIN LATERAL (
    SELECT text FROM message_bodies WHERE id = q.body_id
) m
