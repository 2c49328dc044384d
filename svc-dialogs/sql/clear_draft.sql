-- A dialog's draft goes: any ($3 = 0), or only the one saved at pts $3 (primary key of
-- dialogs).
UPDATE dialogs SET draft = NULL, draft_pts = 0
WHERE owner_id = $1 AND peer_user_id = $2 AND draft IS NOT NULL AND ($3 = 0 OR draft_pts = $3)
