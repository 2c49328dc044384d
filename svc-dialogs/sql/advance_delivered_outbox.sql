-- Moves the owner's delivered-outbox watermark forward, creating the dialog when missing
-- (primary key of dialogs).
INSERT INTO dialogs (owner_id, peer_user_id, delivered_outbox_max_id) VALUES ($1, $2, $3)
ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET delivered_outbox_max_id = $3
WHERE dialogs.delivered_outbox_max_id < $3
