-- An owner's messages whose text matches a pattern, newest first, seeking by box id: the
-- bodies that match come from the trigram index message_bodies_text_trgm, each probes the
-- owner's box of it through message_boxes_body, and the filters apply to the box.
-- $1 owner, $2 peer (0 = any), $3 ILIKE pattern, $4 min date, $5 max date (inclusive),
-- $6 sender (0 = any), $7 seek key (box ids below it), $8 limit.
SELECT bx.*, m.sender_id, m.text, m.silent, m.noforwards, m.edit_date
FROM message_bodies m
JOIN message_boxes bx ON bx.owner_id = $1 AND bx.body_id = m.id
WHERE m.text ILIKE $3
  AND ($6 = 0 OR m.sender_id = $6)
  AND ($2 = 0 OR bx.peer_user_id = $2)
  AND bx.date >= $4 AND bx.date <= $5
  AND bx.box_id < $7
  -- A deleted box is never found.
  AND NOT bx.deleted
ORDER BY bx.box_id DESC
LIMIT $8
