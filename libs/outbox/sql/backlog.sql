-- The age in seconds of a destination's oldest pending row, the number of its failed rows
-- (primary key of outbox, from its head: pending rows are few unless a destination is down),
-- and the number of its pending rows (index outbox_due, partial on pending rows).
SELECT coalesce((SELECT extract(epoch FROM now() - created_at)::float8 FROM outbox
                 WHERE destination = $1 AND status = 0 ORDER BY id LIMIT 1), 0),
       (SELECT count(*) FROM outbox WHERE destination = $1 AND status = 2),
       (SELECT count(*) FROM outbox WHERE destination = $1 AND status = 0)
