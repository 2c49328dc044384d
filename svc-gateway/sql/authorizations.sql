-- The devices signed in to a user (index auth_keys_user; a user has few).
SELECT id AS auth_key_id, device_model,
       extract(epoch FROM created_at)::bigint AS created_at,
       coalesce(extract(epoch FROM bound_at)::bigint, 0) AS bound_at
FROM auth_keys
WHERE user_id = $1
ORDER BY id
LIMIT 1000
