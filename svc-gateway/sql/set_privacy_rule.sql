-- A user's rule for one key, replacing the one before (primary key of privacy_rules).
INSERT INTO privacy_rules (user_id, key, value, allow_user_ids, deny_user_ids)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (user_id, key) DO UPDATE
SET value = excluded.value,
    allow_user_ids = excluded.allow_user_ids,
    deny_user_ids = excluded.deny_user_ids
