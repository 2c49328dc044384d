-- The owner's boxes still queued for the indexer (new, edited, or deleted since it last ran;
-- primary key of search_queue, her range only), each box probed by message_boxes_body and its
-- body by primary key: what a search tests of them. Below the seek key $3, of dialog $2
-- unless 0, never a deleted box.
SELECT bx.box_id, bx.date, m.sender_id, m.text
FROM search_queue q
CROSS JOIN LATERAL (
    SELECT box_id, date, peer_user_id, deleted FROM message_boxes
    WHERE owner_id = q.owner_id AND body_id = q.body_id
    LIMIT 1
) bx
CROSS JOIN LATERAL (
    SELECT sender_id, text FROM message_bodies WHERE id = q.body_id
) m
WHERE q.owner_id = $1
  AND NOT bx.deleted AND ($2 = 0 OR bx.peer_user_id = $2) AND bx.box_id < $3
