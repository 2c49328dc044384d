-- One row per (owner, peer): the dialog's top message, read watermarks and unread counter.

CREATE TABLE dialogs (
    owner_id           BIGINT NOT NULL,
    peer_user_id       BIGINT NOT NULL,
    top_message_id     BIGINT NOT NULL DEFAULT 0,
    top_message_date   BIGINT NOT NULL DEFAULT 0,
    read_inbox_max_id  BIGINT NOT NULL DEFAULT 0,
    read_outbox_max_id BIGINT NOT NULL DEFAULT 0,
    unread_count       INT    NOT NULL DEFAULT 0,
    PRIMARY KEY (owner_id, peer_user_id)
) PARTITION BY HASH (owner_id);

-- getDialogs: newest top message first, seeking by (date, id, peer).
CREATE INDEX dialogs_order ON dialogs (owner_id, top_message_date DESC, top_message_id DESC, peer_user_id DESC);

DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE dialogs_p%s PARTITION OF dialogs FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
    END LOOP;
END $$;
