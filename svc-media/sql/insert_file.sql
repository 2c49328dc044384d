-- A distinct content, stored once under its hash (unique index on files.sha256); whether this
-- statement stored it (when another upload stored it first, this one's blobs are not needed).
-- The existing row is locked until the transaction ends, so the collector cannot take it.
INSERT INTO files (sha256, size) VALUES ($1, $2)
ON CONFLICT (sha256) DO UPDATE SET size = EXCLUDED.size
RETURNING id, (xmax = 0) AS inserted
