-- A user went offline at $2 (Unix milliseconds); never moves back.
INSERT INTO last_seen (user_id, was_online)
VALUES ($1, to_timestamp($2 / 1000.0))
ON CONFLICT (user_id) DO UPDATE
SET was_online = GREATEST(last_seen.was_online, EXCLUDED.was_online)
