-- A dialog's draft, saved by the update at pts $4 (primary key of dialogs; made when missing).
INSERT INTO dialogs (owner_id, peer_user_id, draft, draft_pts) VALUES ($1, $2, $3, $4)
ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET
    draft = EXCLUDED.draft, draft_pts = EXCLUDED.draft_pts
