-- The messages of a query of boxes (the subquery below, selecting message_boxes rows, a page at
-- most), each box's body probed by primary key. A plain join may be planned as a hash join over a
-- scan of every body ever sent, whose cost grows with the whole service; probing costs the
-- same whatever the number of bodies. The one column list of a message as its owner sees it.
SELECT b.owner_id, b.box_id, b.peer_user_id, b.body_id, b.out, b.reply_to_box_id, b.date,
       m.sender_id, m.text, m.silent, m.noforwards, m.edit_date
FROM ({box_query}) b
CROSS JOIN LATERAL (
    SELECT sender_id, text, silent, noforwards, edit_date FROM message_bodies
    WHERE id = b.body_id LIMIT 1
) m
