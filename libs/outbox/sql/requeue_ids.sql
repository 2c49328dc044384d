-- Makes the failed rows $1 pending again with no attempts, due at once (primary key of
-- outbox). Returns how many it moved.
WITH moved AS (
    UPDATE outbox SET status = 0, attempts = 0, available_at = now(), last_error = NULL
    WHERE id = ANY($1) AND status = 2
    RETURNING 1
)
SELECT count(*) FROM moved
