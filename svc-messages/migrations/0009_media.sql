-- Media messages. A message's file is a snapshot of what svc-media stored when it was sent
-- (kind, content id, size, hash, attributes, a photo's sizes), one value for every owner, so
-- on the body, stored like entities as the protobuf encoding of the API's MessageMedia
-- (empty for none): written and read whole with its message. Its content hash is a column of
-- its own, so that instant upload can ask whether an owner holds a message with a content.
-- Messages of one album share grouped_id (0: none). Whether a voice or video note was played
-- is each recipient's own, so on the box.
ALTER TABLE message_bodies
    ADD COLUMN media        BYTEA  NOT NULL DEFAULT '',
    ADD COLUMN media_sha256 TEXT   NOT NULL DEFAULT '',
    ADD COLUMN grouped_id   BIGINT NOT NULL DEFAULT 0;

ALTER TABLE message_boxes
    ADD COLUMN media_unread BOOLEAN NOT NULL DEFAULT false;

-- The bodies carrying a content (instant upload's question), then each owner's box of it.
CREATE INDEX message_bodies_media_sha256 ON message_bodies (media_sha256)
    WHERE media_sha256 <> '';
