-- The other owners of the dialogs benchmark: $1 of them (users 2…), with $2 dialogs each.
INSERT INTO dialogs (owner_id, peer_user_id, top_message_id, top_message_date, owner_wrote)
SELECT o, 1000 + i, 3 * i, 1700000000 + (i * 7919 + o) % 1000000, true
FROM generate_series(2, $1::bigint + 1) AS o, generate_series(1, $2::bigint) AS i
