-- A page of failed rows after $2 by ascending id, of destination $1 (all when empty), at most
-- $3 (index outbox_failed, partial on failed rows).
SELECT id, destination, items, attempts, coalesce(last_error, '') AS last_error,
       extract(epoch FROM created_at)::int8 AS created_at
FROM outbox
WHERE status = 2 AND id > $2 AND ($1 = '' OR destination = $1)
ORDER BY id
LIMIT $3
