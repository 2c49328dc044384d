-- One user ($1) as each of the viewers ($2) finds her: each viewer's contact names for her,
-- and whether she keeps the viewer as a contact (primary keys of users and of contacts, read
-- both ways, one LATERAL probe per viewer so the plan holds however the statement is
-- prepared).
SELECT v.viewer_id, u.id, u.phone, u.first_name, u.last_name, u.username, u.about,
       u.photo_file_id,
       mine.first_name AS contact_first_name,
       mine.last_name AS contact_last_name,
       (theirs.owner_id IS NOT NULL) AS keeps_viewer
FROM unnest($2::bigint[]) AS v (viewer_id)
JOIN users u ON u.id = $1
LEFT JOIN LATERAL (
    SELECT c.first_name, c.last_name FROM contacts c
    WHERE c.owner_id = v.viewer_id AND c.contact_user_id = u.id
    LIMIT 1
) mine ON true
LEFT JOIN LATERAL (
    SELECT c.owner_id FROM contacts c
    WHERE c.owner_id = u.id AND c.contact_user_id = v.viewer_id
    LIMIT 1
) theirs ON true
