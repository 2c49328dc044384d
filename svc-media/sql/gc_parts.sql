-- Parts of uploads left unfinished for longer than the grace period, a batch at a time, gone
-- from the table; their blobs are deleted after (upload_parts_age).
DELETE FROM upload_parts p
USING (
    SELECT owner_id, file_id, part FROM upload_parts
    WHERE created_at < now() - make_interval(secs => $1)
    ORDER BY created_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
) old
WHERE p.owner_id = old.owner_id AND p.file_id = old.file_id AND p.part = old.part
RETURNING p.blob_key
