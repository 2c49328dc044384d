-- A content whose last reference went: gone from the table unless a reference to it came in
-- meanwhile (file_refs_file), with its blobs' rows (primary key of content_blobs); the blob
-- keys, to delete the blobs after the commit.
WITH gone AS (
    DELETE FROM files f
    WHERE f.id = $1
      AND NOT EXISTS (SELECT 1 FROM file_refs r WHERE r.file_id = f.id)
    RETURNING f.id
)
DELETE FROM content_blobs b
USING gone
WHERE b.file_id = gone.id
RETURNING b.blob_key
