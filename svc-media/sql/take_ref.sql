-- A message takes an owner's file reference: the collector leaves it from now on; the content
-- behind it (primary keys of file_refs and files).
WITH taken AS (
    UPDATE file_refs SET used = true
    WHERE id = $1 AND owner_id = $2
    RETURNING file_id, name
)
SELECT f.id AS file_id, f.sha256, f.size, t.name
FROM taken t JOIN files f ON f.id = t.file_id
