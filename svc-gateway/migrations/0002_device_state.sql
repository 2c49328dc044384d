-- Per-device state, keyed by (auth key, user): switching the account on one key starts a fresh
-- state and never touches the account's update log.
CREATE TABLE device_state (
    auth_key_id BIGINT      NOT NULL,
    user_id     BIGINT      NOT NULL,
    -- The last pts the device acknowledged: it only moves over a contiguous applied range.
    acked_pts   INT         NOT NULL DEFAULT 0,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (auth_key_id, user_id)
);
