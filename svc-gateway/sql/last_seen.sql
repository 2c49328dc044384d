-- The last time online of these users (Unix seconds), those who have one.
SELECT user_id, floor(extract(epoch FROM was_online))::BIGINT AS was_online
FROM last_seen
WHERE user_id = ANY($1)
