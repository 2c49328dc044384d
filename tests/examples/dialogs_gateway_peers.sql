-- The benchmark's peers as signing up makes them (a sign-up is one row of gateway.users),
-- with what a profile holds beside the first name: a last name, a username for every third,
-- an about text. $1: how many; their phones are 1902 and seven digits. Returns id and phone.
INSERT INTO gateway.users (phone, first_name, last_name, username, about)
SELECT '1902' || lpad(i::text, 7, '0'),
       'Peer',
       'No. ' || i,
       CASE WHEN i % 3 = 0 THEN 'bench_peer_' || i END,
       'a peer of the GetDialogs benchmark'
FROM generate_series(1, $1::int) AS i
RETURNING id, phone
