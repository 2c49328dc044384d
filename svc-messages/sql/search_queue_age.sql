-- How long the oldest queued box has waited, in seconds, 0 when none (a scan of
-- search_queue, which the indexer keeps short).
SELECT coalesce(extract(epoch FROM now() - min(queued_at))::float8, 0) FROM search_queue
