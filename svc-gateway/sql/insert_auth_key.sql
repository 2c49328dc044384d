-- A new auth key; no row when the id is taken (primary key of auth_keys).
INSERT INTO auth_keys (id, secret_hash, device_model) VALUES ($1, $2, $3)
ON CONFLICT (id) DO NOTHING
