-- Dialogs move to folders (peers $2, folders $3, one each); one that changes folder is
-- unpinned, and one not there yet is made (primary key of dialogs).
INSERT INTO dialogs AS x (owner_id, peer_user_id, folder_id)
SELECT $1, peer, folder FROM UNNEST($2::bigint[], $3::int[]) AS t(peer, folder)
ORDER BY peer
ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET
    folder_id = EXCLUDED.folder_id,
    pinned_rank = CASE WHEN x.folder_id = EXCLUDED.folder_id THEN x.pinned_rank ELSE 0 END
