-- References no message took within the grace period, a batch at a time (file_refs_untaken);
-- the contents they named, which may have no reference left.
DELETE FROM file_refs r
USING (
    SELECT id FROM file_refs
    WHERE NOT used AND created_at < now() - make_interval(secs => $1)
    ORDER BY created_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
) old
WHERE r.id = old.id
RETURNING r.file_id
