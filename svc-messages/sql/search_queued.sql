-- The owner's boxes whose bodies wait in search_queue (new, edited or partly deleted since
-- the indexer last ran): a scan of the queue, which the indexer keeps short, each body probed
-- by primary key and the owner's box by message_boxes_body. Below the seek key $3, of dialog
-- $2 unless 0, never a deleted box.
SELECT bx.*
FROM search_queue q
CROSS JOIN LATERAL (
    SELECT id FROM message_bodies
    WHERE id = q.body_id AND (sender_id = $1 OR recipient_id = $1)
) m
CROSS JOIN LATERAL (
    SELECT * FROM message_boxes
    WHERE owner_id = $1 AND body_id = m.id
    LIMIT 1
) bx
WHERE NOT bx.deleted AND ($2 = 0 OR bx.peer_user_id = $2) AND bx.box_id < $3
