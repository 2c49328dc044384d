-- svc-dispatch keeps its push jobs in the shared outbox table (destination 'push'): claims in
-- batches, leases, attempts and terminal failures come with it. Nothing else is needed yet;
-- this migration marks the schema as dispatch's own.
COMMENT ON SCHEMA dispatch IS 'svc-dispatch: the push outbox';
