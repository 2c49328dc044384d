-- The outbox is a queue whose rows live for milliseconds, so dead rows pile up far faster
-- than the default autovacuum (a fifth of a table that is nearly always empty) notices:
-- vacuum it once a few thousand rows are dead, unthrottled, so the relay's claims and the
-- acknowledgements' deletes do not wade through them.
ALTER TABLE outbox SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);
