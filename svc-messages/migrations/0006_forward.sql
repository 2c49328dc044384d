-- A forwarded message's header, on its body (one value for every owner): the original sender,
-- the original date and the original message's id in the box of the user who first forwarded
-- it; in Saved Messages also the dialog it was saved from and its id there. fwd_from_user_id
-- 0 means the message is not a forward, fwd_saved_from_user_id 0 that it was not saved.
ALTER TABLE message_bodies
    ADD COLUMN fwd_from_user_id       BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN fwd_date               BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN fwd_msg_id             BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN fwd_saved_from_user_id BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN fwd_saved_from_msg_id  BIGINT NOT NULL DEFAULT 0;
