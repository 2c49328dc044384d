-- The content with this hash when the owner holds a file of it (unique index on files.sha256,
-- then file_refs_owner_file).
SELECT f.id AS file_id, f.sha256, f.size, '' AS name
FROM files f
WHERE f.sha256 = $1
  AND ($2 OR EXISTS (SELECT 1 FROM file_refs r WHERE r.owner_id = $3 AND r.file_id = f.id))
