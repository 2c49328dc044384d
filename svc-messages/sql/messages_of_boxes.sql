-- The messages of a query of boxes (the subquery below, selecting whole message_boxes rows, a
-- page at most), each box's body probed by primary key. A plain join may be planned as a hash
-- join over a scan of every body ever sent, whose cost grows with the whole service; probing
-- costs the same whatever the number of bodies. The body's columns a message shows are listed
-- here and nowhere else; so are its reactions, every user's of the body (primary key of
-- message_reactions), the same for every owner's box, looked up only for a body ever reacted
-- to (a qual on the outer row alone: the lookup is skipped, not filtered).
SELECT b.*, m.*, rx.*
FROM ({box_query}) b
CROSS JOIN LATERAL (
    SELECT sender_id, text, silent, noforwards, edit_date, entities, quote,
           fwd_from_user_id, fwd_date, fwd_msg_id, fwd_saved_from_user_id, fwd_saved_from_msg_id,
           media, grouped_id, reacted
    FROM message_bodies
    WHERE id = b.body_id
    LIMIT 1
) m
CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(r.user_id ORDER BY r.user_id), '{}') AS reactors,
           coalesce(array_agg(r.reaction ORDER BY r.user_id), '{}') AS reactions
    FROM message_reactions r
    WHERE m.reacted AND r.body_id = b.body_id
) rx
