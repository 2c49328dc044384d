-- Forgets up to $2 received event ids older than $1 seconds, oldest first (index
-- inbox_received).
DELETE FROM inbox WHERE event_id IN (
    SELECT event_id FROM inbox
    WHERE received_at < now() - $1 * interval '1 second'
    ORDER BY received_at
    LIMIT $2)
