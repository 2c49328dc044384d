-- How long the next body the indexer takes has waited, in seconds, 0 when none (primary key
-- of search_queue, from its head).
SELECT coalesce((SELECT extract(epoch FROM now() - queued_at)::float8 FROM search_queue
                 ORDER BY body_id LIMIT 1), 0)
