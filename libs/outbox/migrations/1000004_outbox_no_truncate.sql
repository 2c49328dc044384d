-- A vacuum that finds the outbox's trailing pages empty (the usual state of a queue that is
-- drained within milliseconds) truncates them, and truncation holds an ACCESS EXCLUSIVE lock:
-- every producer's insert waits behind it, a stall of tens of milliseconds on every send.
-- The pages are reused by the next inserts anyway, so keep them.
ALTER TABLE outbox SET (vacuum_truncate = false);
