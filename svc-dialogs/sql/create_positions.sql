-- Positions for owners seen for the first time, at pts 0; returns those created (primary key
-- of log_positions, in key order).
INSERT INTO log_positions (owner_id, pts)
SELECT unnest($1::bigint[]), 0 ORDER BY 1
ON CONFLICT DO NOTHING
RETURNING owner_id
