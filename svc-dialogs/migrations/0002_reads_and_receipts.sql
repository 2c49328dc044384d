-- Incoming messages per dialog (ids only): exact unread counts, and the same message's id in
-- the sender's box, so reads and receipts reach the sender in her own ids.
CREATE TABLE dialog_incoming (
    owner_id     BIGINT NOT NULL,
    peer_user_id BIGINT NOT NULL,
    box_id       BIGINT NOT NULL,
    peer_box_id  BIGINT NOT NULL,
    PRIMARY KEY (owner_id, peer_user_id, box_id)
) PARTITION BY HASH (owner_id);
-- A device's receipt spans every dialog of its owner: incoming messages by box id.
CREATE INDEX dialog_incoming_by_box ON dialog_incoming (owner_id, box_id);

-- Every move of an outbox read watermark, with its date: getOutboxReadDate.
CREATE TABLE outbox_reads (
    owner_id     BIGINT NOT NULL,
    peer_user_id BIGINT NOT NULL,
    max_id       BIGINT NOT NULL,
    -- Unix seconds.
    read_at      BIGINT NOT NULL,
    PRIMARY KEY (owner_id, peer_user_id, max_id)
) PARTITION BY HASH (owner_id);

-- DELIVERED, kept per device: the highest box id each device of the owner stored.
CREATE TABLE device_receipts (
    owner_id    BIGINT      NOT NULL,
    auth_key_id BIGINT      NOT NULL,
    max_id      BIGINT      NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, auth_key_id)
) PARTITION BY HASH (owner_id);

-- What the peer's devices stored of our messages (our own ids).
ALTER TABLE dialogs ADD COLUMN delivered_outbox_max_id BIGINT NOT NULL DEFAULT 0;

DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE dialog_incoming_p%s PARTITION OF dialog_incoming FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
        EXECUTE format('CREATE TABLE outbox_reads_p%s PARTITION OF outbox_reads FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
        EXECUTE format('CREATE TABLE device_receipts_p%s PARTITION OF device_receipts FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
    END LOOP;
END $$;
