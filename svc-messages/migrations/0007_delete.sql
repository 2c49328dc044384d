-- Deleted boxes stay (a body is shared, and a deleted box keeps its place in the owner's ids),
-- but no read of a dialog ever wants them: history, a dialog's top after a delete, the next
-- batch of a cleared history and a dialog's search all walk index message_boxes_history.
-- Once a dialog is cleared, a walk over an index that still held its deleted boxes would
-- step over every one of them; the index now holds the boxes not deleted only.
DROP INDEX message_boxes_history;
CREATE INDEX message_boxes_history ON message_boxes (owner_id, peer_user_id, box_id DESC)
    WHERE NOT deleted;
