-- A folder's pinned dialogs become exactly the peers $3, in that order (the first the
-- highest rank); the folder's other pinned dialogs are unpinned, and a peer whose dialog is in
-- another folder (or none) is left out (index dialogs_folder_order for the pinned ones,
-- primary key of dialogs for the peers).
UPDATE dialogs SET pinned_rank = CASE WHEN peer_user_id = ANY($3::bigint[])
        THEN cardinality($3::bigint[]) + 1 - array_position($3::bigint[], peer_user_id)
        ELSE 0 END
WHERE owner_id = $1 AND folder_id = $2
  AND (pinned_rank > 0 OR peer_user_id = ANY($3::bigint[]))
