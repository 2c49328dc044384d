-- A content keeps the blobs it was uploaded in: each byte of an upload is written once (as a
-- part) and a completed upload's parts become the content's blobs, in order, instead of being
-- copied into one blob. A content made by the server (a photo's size, a thumbnail) or stored
-- before this migration is one blob at offset 0.
--
-- Every stored part gets a blob key of its own, fresh at each put (a re-sent part too), so no
-- put can ever overwrite a blob that a completion hashed or that a content holds: a key is
-- written once and only deleted afterwards.

ALTER TABLE upload_parts ADD COLUMN blob_key TEXT NOT NULL DEFAULT '';
-- Parts stored before this migration are where the earlier code put them.
UPDATE upload_parts
SET blob_key = 'parts/' || owner_id || '/' || file_id || '/' || part
WHERE blob_key = '';
ALTER TABLE upload_parts ALTER COLUMN blob_key DROP DEFAULT;

-- The blobs of a content, by the offset of their first byte (a window of a download maps onto
-- the blobs it spans through the primary key).
CREATE TABLE content_blobs (
    file_id     BIGINT NOT NULL REFERENCES files (id),
    byte_offset BIGINT NOT NULL,
    size        BIGINT NOT NULL,
    blob_key    TEXT   NOT NULL,
    PRIMARY KEY (file_id, byte_offset)
);
INSERT INTO content_blobs (file_id, byte_offset, size, blob_key)
SELECT id, 0, size, blob_key FROM files;
ALTER TABLE files DROP COLUMN blob_key;
