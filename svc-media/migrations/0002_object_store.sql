-- Blobs move behind object_store: a content's blob key is stored with it (its upload writes
-- the blob under a fresh key, so a content needs no copy once assembled), and a file
-- reference says whether a message took it (then the collector never takes it).
ALTER TABLE files ADD COLUMN blob_key TEXT NOT NULL DEFAULT '';
UPDATE files SET blob_key = 'blobs/' || sha256 WHERE blob_key = '';

ALTER TABLE file_refs ADD COLUMN used BOOLEAN NOT NULL DEFAULT false;

-- The collector's scans: unfinished uploads by age, untaken references by age, and the
-- references of a content (whether any is left).
CREATE INDEX upload_parts_age ON upload_parts (created_at);
CREATE INDEX file_refs_untaken ON file_refs (created_at) WHERE NOT used;
CREATE INDEX file_refs_file ON file_refs (file_id);
-- An owner's file of a content (instant upload by hash).
CREATE INDEX file_refs_owner_file ON file_refs (owner_id, file_id);
