-- Per-user pts state and the durable update log. Both are keyed by user and hash-partitioned
-- by user id, so a distributed Postgres can shard them by user.

CREATE TABLE user_state (
    user_id     BIGINT      NOT NULL,
    pts         INT         NOT NULL DEFAULT 0,
    -- Updates up to this pts are no longer retained: older clients get "difference too long".
    trimmed_pts INT         NOT NULL DEFAULT 0,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id)
) PARTITION BY HASH (user_id);

CREATE TABLE update_log (
    user_id   BIGINT NOT NULL,
    pts       INT    NOT NULL,
    pts_count INT    NOT NULL,
    event_id  UUID   NOT NULL,
    -- Unix seconds.
    date      BIGINT NOT NULL,
    -- An encoded oxigram.types.v1.Update.
    body      BYTEA  NOT NULL,
    PRIMARY KEY (user_id, pts)
) PARTITION BY HASH (user_id);

-- The receiver's deduplication: an event id appended twice keeps its first pts.
CREATE UNIQUE INDEX update_log_event ON update_log (user_id, event_id);

DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE user_state_p%s PARTITION OF user_state FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
        EXECUTE format('CREATE TABLE update_log_p%s PARTITION OF update_log FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
    END LOOP;
END $$;
