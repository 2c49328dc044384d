-- The owners' positions, locked until commit in key order, so that concurrent applications
-- never deadlock (primary key of log_positions).
SELECT owner_id, pts
FROM log_positions
WHERE owner_id = ANY($1)
ORDER BY owner_id
FOR UPDATE
