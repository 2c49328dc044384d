-- An owner's blocked users after $2, ascending, $3 at most (primary key of blocks).
SELECT blocked_user_id FROM blocks
WHERE owner_id = $1 AND blocked_user_id > $2
ORDER BY blocked_user_id
LIMIT $3
