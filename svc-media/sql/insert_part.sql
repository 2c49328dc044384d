-- A part not stored before (primary key of upload_parts); nothing when one is there already
-- (then the caller replaces it).
INSERT INTO upload_parts (owner_id, file_id, part, size, blob_key) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (owner_id, file_id, part) DO NOTHING
RETURNING part
