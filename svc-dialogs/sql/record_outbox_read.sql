-- The date a read-outbox watermark moved to $3 (primary key of outbox_reads).
INSERT INTO outbox_reads (owner_id, peer_user_id, max_id, read_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING
