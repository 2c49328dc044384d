-- Users by id as one viewer ($2) finds them: her contact names for each, and whether each
-- keeps her as a contact (primary keys of users and of contacts, read both ways).
SELECT u.id, u.phone, u.first_name, u.last_name, u.username, u.about, u.photo_file_id,
       mine.first_name AS contact_first_name,
       mine.last_name AS contact_last_name,
       (theirs.owner_id IS NOT NULL) AS keeps_viewer
FROM users u
LEFT JOIN contacts mine ON mine.owner_id = $2 AND mine.contact_user_id = u.id
LEFT JOIN contacts theirs ON theirs.owner_id = u.id AND theirs.contact_user_id = $2
WHERE u.id = ANY($1)
ORDER BY u.id
