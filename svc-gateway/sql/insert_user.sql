-- A new user; no row when the phone is taken (unique index on users.phone).
INSERT INTO users (phone, first_name) VALUES ($1, $2)
ON CONFLICT (phone) DO NOTHING
RETURNING id, phone, first_name, last_name, username, about, photo_file_id
