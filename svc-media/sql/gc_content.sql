-- A content whose last reference went: gone from the table unless a reference to it came in
-- meanwhile (file_refs_file); its blob key, to delete the blob after the commit.
DELETE FROM files f
WHERE f.id = $1
  AND NOT EXISTS (SELECT 1 FROM file_refs r WHERE r.file_id = f.id)
RETURNING f.blob_key
