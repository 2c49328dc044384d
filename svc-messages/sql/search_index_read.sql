-- What the indexer reads of the claimed bodies $1: each body's text (primary key of
-- message_bodies) and the boxes its sender and recipient hold of it (message_boxes_body).
SELECT bx.owner_id, bx.box_id, bx.peer_user_id, bx.deleted, m.text
FROM unnest($1::bigint[]) q(body_id)
CROSS JOIN LATERAL (
    SELECT id, sender_id, recipient_id, text FROM message_bodies WHERE id = q.body_id
) m
CROSS JOIN LATERAL (
    SELECT owner_id, box_id, peer_user_id, deleted FROM message_boxes
    WHERE owner_id IN (m.sender_id, m.recipient_id) AND body_id = m.id
) bx
