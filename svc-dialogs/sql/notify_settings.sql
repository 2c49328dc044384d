-- A dialog's notification settings (primary key of dialogs; made when missing).
INSERT INTO dialogs (owner_id, peer_user_id, mute_until, show_previews, silent)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET
    mute_until = EXCLUDED.mute_until, show_previews = EXCLUDED.show_previews,
    silent = EXCLUDED.silent
