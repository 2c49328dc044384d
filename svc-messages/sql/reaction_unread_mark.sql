-- The author $1's box of body $2 (index message_boxes_body) becomes reaction_unread $3, when it
-- is not so already: the box returned is a change, which moves her dialog's count by one.
UPDATE message_boxes SET reaction_unread = $3
WHERE owner_id = $1 AND body_id = $2 AND NOT deleted AND reaction_unread <> $3
RETURNING box_id
