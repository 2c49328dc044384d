-- Signs every device of a user out but one (index auth_keys_user; a user has few); the keys
-- signed out.
UPDATE auth_keys SET user_id = NULL, bound_at = now()
WHERE user_id = $1 AND id <> $2
RETURNING id
