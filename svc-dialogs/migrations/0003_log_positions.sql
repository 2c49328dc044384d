-- Dialogs are a projection of each user's update log: svc-updates hands on every logged event
-- with its pts, and they are applied in pts order, each once. This is how far each user's log
-- has been applied. A read counts unread messages as of this position and is appended to the
-- log only while the log is still there, so its count agrees with the log.
CREATE TABLE log_positions (
    owner_id BIGINT NOT NULL,
    pts      INT    NOT NULL,
    PRIMARY KEY (owner_id)
) PARTITION BY HASH (owner_id);

DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE log_positions_p%s PARTITION OF log_positions FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
        -- The shared autovacuum policy (applied before this table existed): positions are
        -- updated in place, HOT-pruned.
        EXECUTE format('ALTER TABLE log_positions_p%s SET (autovacuum_vacuum_threshold = 20000, '
            'autovacuum_analyze_threshold = 20000, autovacuum_vacuum_insert_threshold = 20000)', i);
    END LOOP;
END $$;
