-- Reactions of the peer to the owner's messages that she has not seen. The count is the sum of
-- the deltas her log's reaction events carry: each is one change svc-messages made under its
-- locks, so the sum is right whatever order they are applied in, though a removal applied
-- before the reaction it removes leaves it below 0 for a while (shown as 0).
ALTER TABLE dialogs ADD COLUMN unread_reactions_count INT NOT NULL DEFAULT 0;
