-- auth.bindTempAuthKey: unexpired temporary key $1 acts for permanent key $2 until $3 (unix
-- seconds), which ends it sooner if earlier than its own expiry; refused when $1 signed in
-- itself or is bound to another permanent key (primary key of auth_keys). Once bound, every
-- other unexpired temporary key of $2 ends now (auth_keys_perm_key), so a permanent key has
-- one at a time. Both changes set bound_at, which tells every instance's cache; it is the
-- statement's time, not the transaction's, which began before it waited for $2's row. Both
-- updates see the statement's snapshot, so the key just bound is never among those ended.
WITH bound AS (
    UPDATE auth_keys
       SET perm_key_id = $2,
           expires_at = least(expires_at, to_timestamp($3)),
           bound_at = statement_timestamp()
     WHERE id = $1 AND expires_at > now() AND user_id IS NULL
       AND (perm_key_id IS NULL OR perm_key_id = $2)
    RETURNING id
), ended AS (
    UPDATE auth_keys
       SET expires_at = statement_timestamp(), bound_at = statement_timestamp()
     WHERE perm_key_id = $2 AND id <> $1 AND expires_at > now() AND EXISTS (SELECT FROM bound)
    RETURNING id
)
SELECT EXISTS (SELECT FROM bound) AS bound,
       EXISTS (SELECT FROM auth_keys WHERE id = $1 AND expires_at > now()) AS live,
       array(SELECT id FROM ended) AS ended
