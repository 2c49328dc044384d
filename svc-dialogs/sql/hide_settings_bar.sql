-- The owner hid a dialog's peer settings bar (primary key of dialogs; made when missing, so a
-- bar hidden before the peer's first message stays hidden).
INSERT INTO dialogs (owner_id, peer_user_id, settings_bar_hidden) VALUES ($1, $2, true)
ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET settings_bar_hidden = true
