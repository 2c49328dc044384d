-- Moves a device's acknowledged pts forward, never back (primary key of device_state).
INSERT INTO device_state (auth_key_id, user_id, acked_pts) VALUES ($1, $2, $3)
ON CONFLICT (auth_key_id, user_id) DO UPDATE
    SET acked_pts = GREATEST(device_state.acked_pts, EXCLUDED.acked_pts), updated_at = now()
RETURNING acked_pts
