-- Of the dialogs the owners ($1) just sent in (with the peers $2), those with a draft, and
-- the pts that saved it (primary key of dialogs); the caller keeps the pairs it asked for.
SELECT owner_id, peer_user_id, draft_pts FROM dialogs
WHERE owner_id = ANY($1::bigint[]) AND peer_user_id = ANY($2::bigint[]) AND draft IS NOT NULL
