-- The owner's count of unread reactions in the dialog with $2 moves by $3 (primary key of
-- dialogs); a reaction logged ahead of its message makes the dialog, which the message lists.
INSERT INTO dialogs AS d (owner_id, peer_user_id, unread_reactions_count)
VALUES ($1, $2, $3)
ON CONFLICT (owner_id, peer_user_id)
DO UPDATE SET unread_reactions_count = d.unread_reactions_count + EXCLUDED.unread_reactions_count
