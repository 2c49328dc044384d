-- The pre-pass of a batch with replies, one row per reply found: the message each names in
-- the sender's box of its dialog (primary key of message_boxes), the recipient's box of the
-- same body (index message_boxes_body), and for a reply that quotes, the replied text the
-- quote must occur in (primary key of message_bodies). Run only for batches with replies, so
-- that the others plan and probe nothing for them.
SELECT r.n,
       (SELECT box_id FROM message_boxes
        WHERE owner_id = r.peer_user_id AND body_id = replied.body_id
        LIMIT 1) AS recipient_box_id,
       CASE WHEN r.quoted THEN
           (SELECT text FROM message_bodies WHERE id = replied.body_id)
       END AS replied_text
FROM {replies} WITH ORDINALITY AS r(sender_id, peer_user_id, reply_to_box_id, quoted, n)
CROSS JOIN LATERAL (
    SELECT body_id FROM message_boxes
    WHERE owner_id = r.sender_id AND box_id = r.reply_to_box_id
      AND peer_user_id = r.peer_user_id AND NOT deleted
    LIMIT 1
) replied
