-- Private messages: one shared body per message, and a box row per owner holding the owner's
-- own increasing message id. Owner-keyed tables are hash-partitioned by owner.

CREATE TABLE message_bodies (
    id         BIGSERIAL PRIMARY KEY,
    sender_id  BIGINT  NOT NULL,
    text       TEXT    NOT NULL,
    -- Unix seconds.
    date       BIGINT  NOT NULL,
    silent     BOOLEAN NOT NULL DEFAULT false,
    noforwards BOOLEAN NOT NULL DEFAULT false,
    edit_date  BIGINT  NOT NULL DEFAULT 0
);

CREATE TABLE message_boxes (
    owner_id        BIGINT  NOT NULL,
    box_id          BIGINT  NOT NULL,
    peer_user_id    BIGINT  NOT NULL,
    body_id         BIGINT  NOT NULL,
    out             BOOLEAN NOT NULL,
    reply_to_box_id BIGINT  NOT NULL DEFAULT 0,
    date            BIGINT  NOT NULL,
    deleted         BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (owner_id, box_id)
) PARTITION BY HASH (owner_id);

-- History of one dialog, newest first, seeking by box id.
CREATE INDEX message_boxes_history ON message_boxes (owner_id, peer_user_id, box_id DESC);
-- An owner's box of a given body (replies, replays).
CREATE INDEX message_boxes_body ON message_boxes (owner_id, body_id);

-- The last box id handed out per owner.
CREATE TABLE box_sequences (
    owner_id    BIGINT NOT NULL,
    last_box_id BIGINT NOT NULL,
    PRIMARY KEY (owner_id)
) PARTITION BY HASH (owner_id);

-- (sender, random_id) is used once, forever: a replay returns the original message.
CREATE TABLE idempotency_keys (
    sender_id    BIGINT      NOT NULL,
    random_id    BIGINT      NOT NULL,
    body_id      BIGINT,
    request_hash BYTEA       NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (sender_id, random_id)
) PARTITION BY HASH (sender_id);

DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE message_boxes_p%s PARTITION OF message_boxes FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
        EXECUTE format('CREATE TABLE box_sequences_p%s PARTITION OF box_sequences FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
        EXECUTE format('CREATE TABLE idempotency_keys_p%s PARTITION OF idempotency_keys FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
    END LOOP;
END $$;
