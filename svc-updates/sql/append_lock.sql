-- The first statement of an append under its users' row locks. It finds the events already
-- logged (index update_log_event, probed once per event: the LIMIT keeps the lateral subquery
-- a nested loop, where a plain join planned while the log was small stays a hash join over a
-- scan of every partition), then adds the others' pts_count to their users' pts, locking
-- those rows until commit (primary key of user_state; ascending ids, so concurrent batches
-- never deadlock). Each user's row is written once per batch, and a user's first event
-- creates it. The lookup reads the statement's snapshot, taken before any lock wait: should
-- another instance log one of these events meanwhile, the log insert after it breaks
-- update_log_event and the whole batch fails and is retried, rather than logging the event
-- twice. Rows: each moved user's new pts and retention floor (no event id), and each event
-- logged before with its pts and pts_count.
WITH e AS (
    SELECT * FROM {events} AS e(user_id, event_id, pts_count)
), known AS (
    SELECT e.user_id, e.event_id, l.pts, l.pts_count
    FROM e CROSS JOIN LATERAL (
        SELECT pts, pts_count FROM update_log
        WHERE user_id = e.user_id AND event_id = e.event_id
        LIMIT 1
    ) l
), moved AS (
    INSERT INTO user_state AS s (user_id, pts)
    SELECT e.user_id, sum(e.pts_count) FROM e
    WHERE NOT EXISTS (
        SELECT 1 FROM known k WHERE k.user_id = e.user_id AND k.event_id = e.event_id)
    GROUP BY e.user_id
    ORDER BY e.user_id
    ON CONFLICT (user_id) DO UPDATE SET pts = s.pts + EXCLUDED.pts, updated_at = now()
    RETURNING user_id, pts, trimmed_pts
)
SELECT user_id, NULL::uuid AS event_id, pts, trimmed_pts, NULL::int AS pts_count FROM moved
UNION ALL
SELECT user_id, event_id, pts, NULL::int, pts_count FROM known
