-- The owner's unread mark of a dialog (primary key of dialogs; made when missing).
INSERT INTO dialogs (owner_id, peer_user_id, unread_mark) VALUES ($1, $2, $3)
ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET unread_mark = EXCLUDED.unread_mark
