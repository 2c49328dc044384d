-- Backs off rows whose delivery failed: capped exponential backoff ($3 base, $4 cap, in
-- milliseconds) with jitter, or the base alone for rows waiting on earlier ones ($7); a row
-- refused permanently ($6) is kept as failed (status 2) once it has had $2 attempts. Returns
-- how many events were retried and how many failed (primary key of outbox).
WITH moved AS (
    UPDATE outbox SET
        status = CASE WHEN $6 AND attempts >= $2 THEN 2 ELSE 0 END,
        available_at = now() + CASE WHEN $7 THEN $3::float8
            ELSE LEAST($4::float8, $3::float8 * power(2, LEAST(attempts - 1, 40))) END
            * (0.8 + random() * 0.4) * interval '1 millisecond',
        last_error = $5
    WHERE id = ANY($1)
    RETURNING status, items
)
SELECT coalesce(sum(items) FILTER (WHERE status = 0), 0),
       coalesce(sum(items) FILTER (WHERE status = 2), 0)
FROM moved
