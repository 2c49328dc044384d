-- The transactional outbox of a producing service, and the inbox of a receiving one.
-- Both live in the service's own schema.

CREATE TABLE outbox (
    id           BIGSERIAL PRIMARY KEY,
    destination  TEXT        NOT NULL,
    event_id     UUID        NOT NULL,
    payload      BYTEA       NOT NULL,
    traceparent  TEXT,
    -- 0 = pending (or leased until available_at), 2 = failed for good.
    status       SMALLINT    NOT NULL DEFAULT 0,
    attempts     INT         NOT NULL DEFAULT 0,
    available_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_error   TEXT,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (destination, event_id)
);

-- The relay's claim: due pending rows of one destination, oldest first.
CREATE INDEX outbox_due ON outbox (destination, available_at, id) WHERE status = 0;

-- Events already received, so a replayed hand-off changes nothing.
CREATE TABLE inbox (
    event_id    UUID        PRIMARY KEY,
    received_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
