-- A distinct content, stored once under its hash (unique index on files.sha256).
INSERT INTO files (sha256, size) VALUES ($1, $2)
ON CONFLICT (sha256) DO UPDATE SET size = EXCLUDED.size
RETURNING id
