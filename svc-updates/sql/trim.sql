-- Forgets a user's log up to pts $2 and records the new retention floor (primary key of
-- update_log, a range of one user's pts, and of user_state).
WITH gone AS (DELETE FROM update_log WHERE user_id = $1 AND pts <= $2)
UPDATE user_state SET trimmed_pts = $2 WHERE user_id = $1
