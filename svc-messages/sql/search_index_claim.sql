-- The indexer's claim: up to $1 queued bodies, oldest first, taken off the queue in its
-- transaction (primary key of search_queue; rows another indexer holds are skipped).
DELETE FROM search_queue
WHERE body_id IN (
    SELECT body_id FROM search_queue
    ORDER BY body_id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
RETURNING body_id
