-- Extends the lease of claimed rows still pending by $2 milliseconds (primary key of outbox):
-- a relay renews its rows while their delivery is in flight, so a short lease only ever
-- expires on a relay that died.
UPDATE outbox SET available_at = now() + $2 * interval '1 millisecond'
WHERE id = ANY($1) AND status = 0
