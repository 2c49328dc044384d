-- How far each owner's log has been applied (primary key of log_positions).
INSERT INTO log_positions (owner_id, pts)
SELECT * FROM UNNEST($1::bigint[], $2::int[]) ORDER BY 1
ON CONFLICT (owner_id) DO UPDATE SET pts = EXCLUDED.pts
