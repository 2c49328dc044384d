-- The content behind an owner's file reference; the owner check is the authorization
-- (primary keys of file_refs and files).
SELECT f.id AS file_id, f.sha256, f.size, r.name
FROM file_refs r JOIN files f ON f.id = r.file_id
WHERE r.id = $1 AND r.owner_id = $2
