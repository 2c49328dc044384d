-- The rows kept as failed, for the admin API's pages and requeues (by destination or not).
CREATE INDEX outbox_failed ON outbox (id) WHERE status = 2;
