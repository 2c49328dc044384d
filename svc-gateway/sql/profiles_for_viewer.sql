-- Users by id as one viewer ($2) finds them: her contact names for each, whether each keeps
-- her as a contact, and each one's last time online in Unix seconds (primary keys of users,
-- of contacts read both ways, and of last_seen). The contact reads are one primary-key probe
-- per user (LATERAL … LIMIT 1), so the plan stays the same whatever the page size and however
-- the statement is prepared.
SELECT u.id, u.phone, u.first_name, u.last_name, u.username, u.about, u.photo_file_id,
       mine.first_name AS contact_first_name,
       mine.last_name AS contact_last_name,
       (theirs.owner_id IS NOT NULL) AS keeps_viewer,
       floor(extract(epoch FROM seen.was_online))::BIGINT AS was_online
FROM users u
LEFT JOIN last_seen seen ON seen.user_id = u.id
LEFT JOIN LATERAL (
    SELECT c.first_name, c.last_name FROM contacts c
    WHERE c.owner_id = $2 AND c.contact_user_id = u.id
    LIMIT 1
) mine ON true
LEFT JOIN LATERAL (
    SELECT c.owner_id FROM contacts c
    WHERE c.owner_id = u.id AND c.contact_user_id = $2
    LIMIT 1
) theirs ON true
WHERE u.id = ANY($1)
ORDER BY u.id
