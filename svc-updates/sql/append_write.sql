-- The log rows of an append and the move of its users' pts, in one statement (the outbox
-- rows of what is handed on follow these items). Each user's row moves only from the pts the
-- batch started from (primary key of user_state; ascending ids, so concurrent writers never
-- deadlock), and expect_moved fails the whole statement, writing nothing, unless every row
-- did: another writer moved one first. The log rows' primary key and update_log_event fail
-- it too when a pts or an event was taken meanwhile. A batch whose users' rows were moved
-- under their locks already moves none here.
moved AS (
    INSERT INTO user_state AS s (user_id, pts)
    SELECT user_id, to_pts FROM {moves} AS m(user_id, from_pts, to_pts) ORDER BY user_id
    ON CONFLICT (user_id) DO UPDATE SET pts = EXCLUDED.pts, updated_at = now()
    WHERE s.pts = ({moves.from_pts})[array_position({moves.user_id}, s.user_id)]
    RETURNING user_id
), log AS (
    INSERT INTO update_log (user_id, pts, pts_count, event_id, date, body)
    SELECT * FROM {log}
    WHERE expect_moved((SELECT count(*) FROM moved), cardinality({moves.user_id}))
)
