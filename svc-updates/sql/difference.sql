-- A user's state and the logged updates after a pts, in one statement and so from one
-- snapshot: the state returned is never older than the last update returned, however many
-- appends commit meanwhile. One row per update, each repeating the state; one row with no
-- update when none is due; no row when the user has no state yet. The log is read only when
-- the pts is still retained. Primary keys of user_state and update_log.
SELECT s.pts AS state_pts,
       s.trimmed_pts,
       extract(epoch FROM s.updated_at)::bigint AS state_date,
       u.pts,
       u.pts_count,
       u.date,
       u.body
FROM (SELECT pts, trimmed_pts, updated_at FROM user_state WHERE user_id = $1) AS s
LEFT JOIN LATERAL (
    SELECT pts, pts_count, date, body FROM update_log
    WHERE user_id = $1 AND pts > $2 AND pts <= s.pts AND $2 >= s.trimmed_pts
    ORDER BY pts
    LIMIT $3
) AS u ON true
ORDER BY u.pts
