-- The dialogs benchmark's data: owner $1 with $2 dialogs (peers 1001…), their top messages
-- spread over time; every tenth archived, every tenth muted, every fourth with unread
-- messages, every fiftieth marked unread, and $3 of the main list pinned in an order.
INSERT INTO dialogs (owner_id, peer_user_id, top_message_id, top_message_date,
                     read_inbox_max_id, unread_count, folder_id, pinned_rank, unread_mark,
                     mute_until, owner_wrote)
SELECT $1, 1000 + i, 3 * i, 1700000000 + (i * 7919) % 1000000,
       CASE WHEN i % 4 = 0 THEN 3 * i - 3 ELSE 3 * i END,
       CASE WHEN i % 4 = 0 THEN 1 + i % 7 ELSE 0 END,
       CASE WHEN i % 10 = 3 THEN 1 ELSE 0 END,
       CASE WHEN i % 10 = 7 AND i <= $3 * 10 THEN ($3 + 1 - (i + 3) / 10)::int ELSE 0 END,
       i % 50 = 0,
       CASE WHEN i % 10 = 5 THEN 2147483647 ELSE 0 END,
       i % 3 = 0
FROM generate_series(1, $2::bigint) AS i
