-- Autovacuum policy for every service schema, applied after the service's own migrations and
-- the outbox's. Autovacuum wakes every few seconds for the outbox queues (see the outbox's
-- migrations), and each round also vacuumed and analysed every small hot table (users' pts,
-- dialogs, boxes, the update log: eight partitions each) whose 50 changed rows had passed the
-- default thresholds again: the worst send stalls recurred at that 5 s rhythm. These tables
-- need neither: updates of their hot rows are HOT-pruned in place, and the statements that
-- serve requests probe indexes whatever the statistics say. So they wait for 20 000 changed
-- rows on top of the usual share of the table, which on a large table changes nothing.
-- oxictl bench at 671 sends/s, side by side: send p99 78, 45 and 51 ms with this against 108,
-- 58 and 73 ms without. The queues (outbox, inbox) keep their own settings. A table added by a
-- later migration sets these options itself.
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT c.relname FROM pg_class c
        WHERE c.relnamespace = current_schema()::regnamespace
          AND c.relkind = 'r'
          AND c.relname NOT IN ('outbox', 'inbox', '_sqlx_migrations')
    LOOP
        EXECUTE format(
            'ALTER TABLE %I SET (autovacuum_vacuum_threshold = 20000, autovacuum_analyze_threshold = 20000)',
            t.relname
        );
    END LOOP;
END $$;
