-- A distinct content, stored once under its hash (unique index on files.sha256): the blob
-- key of the content as stored, which is another upload's when it won a race to the same
-- content (then this upload's blob is not needed).
INSERT INTO files (sha256, size, blob_key) VALUES ($1, $2, $3)
ON CONFLICT (sha256) DO UPDATE SET size = EXCLUDED.size
RETURNING id, blob_key
