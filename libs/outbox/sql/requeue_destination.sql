-- Makes every failed row of destination $1 pending again with no attempts, due at once
-- (index outbox_failed, partial on failed rows). Returns how many it moved.
WITH moved AS (
    UPDATE outbox SET status = 0, attempts = 0, available_at = now(), last_error = NULL
    WHERE status = 2 AND destination = $1
    RETURNING 1
)
SELECT count(*) FROM moved
