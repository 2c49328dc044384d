-- Who blocked whom. A blocked sender still sees her own message; the blocker gets no box,
-- no pts and no push.
CREATE TABLE blocks (
    owner_id        BIGINT      NOT NULL,
    blocked_user_id BIGINT      NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, blocked_user_id)
) PARTITION BY HASH (owner_id);

DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE blocks_p%s PARTITION OF blocks FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
    END LOOP;
END $$;
