-- A user's profile fields as changed (primary key of users; the username's unique index
-- refuses one another user has).
UPDATE users
SET first_name = $2, last_name = $3, username = $4, about = $5, photo_file_id = $6
WHERE id = $1
