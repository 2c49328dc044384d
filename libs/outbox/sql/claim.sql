-- Leases up to $2 due rows of destination $1 for $3 milliseconds, oldest first (index
-- outbox_due to pick them, the primary key to move them: an IN (subquery) here would
-- hash-join a scan of the whole table).
UPDATE outbox SET available_at = now() + $3 * interval '1 millisecond', attempts = attempts + 1
WHERE id = ANY(ARRAY(
    SELECT id FROM outbox
    WHERE destination = $1 AND status = 0 AND available_at <= now()
    ORDER BY available_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED))
RETURNING id, event_id, payload, attempts, traceparent, framed
