-- Auth keys signed in or out (or, temporary MTProto keys, bound or ended) at or after $1, at
-- most $2 of them (auth_keys_bound_at), and the database's clock, to ask from next time.
SELECT now() AS checked_at,
       array(SELECT id FROM auth_keys WHERE bound_at >= $1 LIMIT $2) AS auth_key_ids
