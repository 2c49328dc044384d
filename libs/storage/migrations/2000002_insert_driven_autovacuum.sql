-- The policy of 2000001 covered vacuums driven by changed rows, not those driven by inserts:
-- autovacuum still visited the append-mostly tables (bodies, boxes, idempotency keys, the
-- update log, incoming messages: eight partitions each) every time 1 000 rows had been added
-- to one of them, that is at almost every 5 s wake-up under load, and the inbox, which the
-- earlier policy left out, was vacuumed and analysed (40-50 ms of CPU each) just as often.
-- On two busy cores each such round was a burst that sends queued behind. These tables are
-- read by index probes, whose plans do not depend on fresh statistics, so an insert-driven
-- vacuum (which only sets visibility bits early) can wait for 20 000 new rows as well. The
-- inbox joins the policy: it is appended to and pruned in batches, not churned like the
-- outbox, which keeps its own settings.
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN
        SELECT c.relname FROM pg_class c
        WHERE c.relnamespace = current_schema()::regnamespace
          AND c.relkind = 'r'
          AND c.relname NOT IN ('outbox', '_sqlx_migrations')
    LOOP
        EXECUTE format(
            'ALTER TABLE %I SET (autovacuum_vacuum_threshold = 20000, '
            'autovacuum_analyze_threshold = 20000, autovacuum_vacuum_insert_threshold = 20000)',
            t.relname
        );
    END LOOP;
END $$;
