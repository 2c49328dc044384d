-- A row carries the events one transaction wrote for one destination, framed together
-- (libs/outbox/src/frame.rs), instead of a row per event: the inserts, index entries and
-- deletes of a queue are most of its cost, and a send writes several events.
-- Rows written before (framed = false) hold one bare event, and are still delivered.
ALTER TABLE outbox ADD COLUMN framed BOOLEAN NOT NULL DEFAULT false;
-- How many events the row carries: what a backlog holds is sum(items).
ALTER TABLE outbox ADD COLUMN items INT NOT NULL DEFAULT 1;
-- A row is named after its first event, and receivers deduplicate by event id anyway: the
-- unique index only cost an index entry per row.
ALTER TABLE outbox DROP CONSTRAINT outbox_destination_event_id_key;
-- A framed row is often a few kilobytes. Past 2 kB Postgres would compress it and move it
-- into the TOAST table, a second insert and delete for a row that lives for milliseconds:
-- keep rows up to a page inline instead.
ALTER TABLE outbox SET (toast_tuple_target = 8160);
