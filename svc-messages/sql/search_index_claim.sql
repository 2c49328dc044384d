-- The indexer's claim: up to $1 queued boxes, taken off the queue in its transaction (a scan
-- of search_queue, which the indexer keeps short; rows another indexer holds are skipped).
DELETE FROM search_queue
WHERE (owner_id, body_id) IN (
    SELECT owner_id, body_id FROM search_queue
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
RETURNING owner_id, body_id
