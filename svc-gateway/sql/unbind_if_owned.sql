-- Signs a device out of a user, only if it is signed in to that user (primary key of
-- auth_keys).
UPDATE auth_keys SET user_id = NULL, bound_at = now()
WHERE id = $1 AND user_id = $2
