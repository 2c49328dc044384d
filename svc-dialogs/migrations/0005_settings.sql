-- What a user sets on her dialogs, each a fact of her update log applied here in pts order
-- like her messages: the folder (0 the main list, 1 the archive), the place among the
-- folder's pinned dialogs (0 not pinned; the higher, the nearer the top), her unread mark,
-- notification settings, draft (an encoded DraftMessage, and the pts that saved it, which a
-- draft-cleared update names) and whether she hid the peer settings bar; and whether she
-- ever sent a message in the dialog (the bar is for strangers who wrote first).
ALTER TABLE dialogs
    ADD COLUMN folder_id         INT     NOT NULL DEFAULT 0,
    ADD COLUMN pinned_rank       INT     NOT NULL DEFAULT 0,
    ADD COLUMN unread_mark       BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN mute_until        BIGINT  NOT NULL DEFAULT 0,
    ADD COLUMN show_previews     BOOLEAN,
    ADD COLUMN silent            BOOLEAN,
    ADD COLUMN draft             BYTEA,
    ADD COLUMN draft_pts         INT     NOT NULL DEFAULT 0,
    ADD COLUMN settings_bar_hidden BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN owner_wrote       BOOLEAN NOT NULL DEFAULT false;

-- getDialogs of a folder: its pinned dialogs first in their order, then the newest top
-- message first, seeking by (rank, date, id, peer).
CREATE INDEX dialogs_folder_order ON dialogs
    (owner_id, folder_id, pinned_rank DESC, top_message_date DESC, top_message_id DESC, peer_user_id DESC);

-- A user's dialog filters (custom folders): each an encoded DialogFilter, and its place in
-- her order.
CREATE TABLE dialog_filters (
    owner_id  BIGINT NOT NULL,
    filter_id INT    NOT NULL,
    position  INT    NOT NULL,
    filter    BYTEA  NOT NULL,
    PRIMARY KEY (owner_id, filter_id)
) PARTITION BY HASH (owner_id);

DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE dialog_filters_p%s PARTITION OF dialog_filters FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
    END LOOP;
END $$;
