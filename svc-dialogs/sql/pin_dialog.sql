-- Pins a dialog at the head of its folder's pinned dialogs, unless it is pinned already or
-- the folder pins $3 dialogs already; a dialog not there yet is made, in the main list. The
-- projection holds the owner's position, so her pins apply one at a time (primary key of
-- dialogs; index dialogs_folder_order for the folder's pinned ones).
WITH d AS (
    SELECT coalesce((SELECT folder_id FROM dialogs WHERE owner_id = $1 AND peer_user_id = $2), 0)
        AS folder_id
), pinned AS (
    SELECT count(*) AS n, coalesce(max(p.pinned_rank), 0) AS top
    FROM dialogs p, d
    WHERE p.owner_id = $1 AND p.folder_id = d.folder_id AND p.pinned_rank > 0
)
INSERT INTO dialogs AS x (owner_id, peer_user_id, pinned_rank)
SELECT $1, $2, pinned.top + 1 FROM pinned WHERE pinned.n < $3
ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET pinned_rank = EXCLUDED.pinned_rank
WHERE x.pinned_rank = 0
