-- A re-sent part replaces the stored one (primary key of upload_parts): the blob key it had,
-- for the caller to delete. The row is locked and read again as last committed, so two
-- re-sends of one part each get the key the other replaced, and none is lost.
UPDATE upload_parts p SET size = $4, blob_key = $5
FROM (
    SELECT blob_key FROM upload_parts
    WHERE owner_id = $1 AND file_id = $2 AND part = $3
    FOR UPDATE
) old
WHERE p.owner_id = $1 AND p.file_id = $2 AND p.part = $3
RETURNING old.blob_key
