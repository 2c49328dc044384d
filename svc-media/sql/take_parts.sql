-- A completed upload's parts leave the upload (primary key of upload_parts, its prefix); when
-- the upload stored a new content ($4) its parts become that content's blobs, at the offsets
-- their sizes give, without a byte copied. The parts taken, in order: the caller checks them
-- against the parts it hashed, and deletes their blobs when the content was stored already.
WITH taken AS (
    DELETE FROM upload_parts
    WHERE owner_id = $1 AND file_id = $2
    RETURNING part, size, blob_key
), placed AS (
    INSERT INTO content_blobs (file_id, byte_offset, size, blob_key)
    SELECT $3, sum(size::BIGINT) OVER (ORDER BY part) - size, size, blob_key
    FROM taken
    WHERE $4
)
SELECT part, size, blob_key FROM taken ORDER BY part
