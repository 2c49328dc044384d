-- ReadReactions: the owner's boxes of the dialog with $2 holding an unseen reaction stop being
-- reaction_unread (index message_boxes_reaction_unread). Each box returned is one unread
-- reaction fewer; a box a concurrent reaction marks after this statement's snapshot stays
-- marked, and that reaction's own event counts it.
UPDATE message_boxes SET reaction_unread = false
WHERE owner_id = $1 AND peer_user_id = $2 AND reaction_unread AND NOT deleted
RETURNING box_id
