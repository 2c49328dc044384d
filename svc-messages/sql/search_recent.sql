-- A search's first step: the owner's newest boxes, at most $9 of them (primary key of
-- message_boxes, or index message_boxes_history within one dialog), each body probed by
-- primary key and tested. Its cost is bounded by $9 whatever the text; a common text fills
-- the page here. A deleted box is never tested nor found (the dialog's index holds none).
-- $1 owner, $2 peer (0 = any), $3 ILIKE pattern, $4 min date, $5 max date (inclusive),
-- $6 sender (0 = any), $7 seek key (box ids below it), $8 limit, $9 boxes to test.
SELECT bx.*, m.*
FROM (
    SELECT * FROM message_boxes
    WHERE owner_id = $1 AND ($2 = 0 OR peer_user_id = $2) AND box_id < $7 AND NOT deleted
    ORDER BY box_id DESC
    LIMIT $9
) bx
CROSS JOIN LATERAL (
    SELECT sender_id, text, silent, noforwards, edit_date, entities, quote,
           fwd_from_user_id, fwd_date, fwd_msg_id, fwd_saved_from_user_id, fwd_saved_from_msg_id
    FROM message_bodies
    WHERE id = bx.body_id AND text ILIKE $3 AND ($6 = 0 OR sender_id = $6)
    LIMIT 1
) m
WHERE bx.date >= $4 AND bx.date <= $5
ORDER BY bx.box_id DESC
LIMIT $8
