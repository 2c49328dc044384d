-- What decides how much the owner ($2) sees of each peer ($1, in phone order): privacy rules
-- (every fifth shows his last seen to contacts only, every thirteenth to nobody, every seventh
-- his phone to everybody, every eleventh his photo to nobody but the owner), a third of them
-- keep her as a contact, and each has a last seen, from minutes to about seven weeks ago (so
-- every bucket a stranger may see shows up). Returns how many peers.
WITH peers AS (
    SELECT id, i FROM unnest($1::bigint[]) WITH ORDINALITY AS p (id, i)
),
rules AS (
    INSERT INTO gateway.privacy_rules (user_id, key, value, allow_user_ids)
    SELECT id, 2, 2, '{}'::bigint[] FROM peers WHERE i % 5 = 0
    UNION ALL
    SELECT id, 2, 3, '{}'::bigint[] FROM peers WHERE i % 13 = 0 AND i % 5 <> 0
    UNION ALL
    SELECT id, 1, 1, '{}'::bigint[] FROM peers WHERE i % 7 = 0
    UNION ALL
    SELECT id, 3, 3, ARRAY[$2::bigint] FROM peers WHERE i % 11 = 0
),
keepers AS (
    INSERT INTO gateway.contacts (owner_id, contact_user_id, first_name)
    SELECT id, $2, 'Bench owner' FROM peers WHERE i % 3 = 1
),
seen AS (
    INSERT INTO gateway.last_seen (user_id, was_online)
    SELECT id, now() - i * interval '7 minutes' FROM peers
)
SELECT count(*) FROM peers
