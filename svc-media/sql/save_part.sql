-- One uploaded part; a re-sent part replaces the earlier one (primary key of upload_parts).
INSERT INTO upload_parts (owner_id, file_id, part, size) VALUES ($1, $2, $3, $4)
ON CONFLICT (owner_id, file_id, part) DO UPDATE SET size = EXCLUDED.size
