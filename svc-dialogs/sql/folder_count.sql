-- How many dialogs a folder lists: the owner's dialog_counts rows of it (primary key, its
-- (owner, folder) prefix).
SELECT coalesce(sum(n), 0)::int FROM dialog_counts WHERE owner_id = $1 AND folder_id = $2
