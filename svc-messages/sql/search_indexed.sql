-- A search's second step, for a text too rare to fill the page among the newest boxes: the
-- owner's bodies containing it, from index message_bodies_search (the owner and the text's
-- trigrams in one scan, whatever other owners' messages say), then her box of each, probed
-- through message_boxes_body. Materialised and probed laterally so that the plan is always
-- this one: its cost follows the owner's matches, which the first step found to be few.
-- $1 owner, $2 peer (0 = any), $3 ILIKE pattern, $4 min date, $5 max date (inclusive),
-- $6 sender (0 = any), $7 seek key (box ids below it), $8 limit.
WITH found AS MATERIALIZED (
    SELECT id, sender_id, text, silent, noforwards, edit_date, entities, quote,
           fwd_from_user_id, fwd_date, fwd_msg_id, fwd_saved_from_user_id, fwd_saved_from_msg_id
    FROM message_bodies
    WHERE ARRAY[sender_id, recipient_id] @> ARRAY[$1::bigint]
      AND text ILIKE $3
      AND ($6 = 0 OR sender_id = $6)
)
SELECT bx.*, f.sender_id, f.text, f.silent, f.noforwards, f.edit_date, f.entities, f.quote,
       f.fwd_from_user_id, f.fwd_date, f.fwd_msg_id, f.fwd_saved_from_user_id,
       f.fwd_saved_from_msg_id
FROM found f
CROSS JOIN LATERAL (
    SELECT * FROM message_boxes
    WHERE owner_id = $1 AND body_id = f.id
    LIMIT 1
) bx
WHERE ($2 = 0 OR bx.peer_user_id = $2)
  AND bx.date >= $4 AND bx.date <= $5
  AND bx.box_id < $7
  -- A deleted box is never found.
  AND NOT bx.deleted
ORDER BY bx.box_id DESC
LIMIT $8
