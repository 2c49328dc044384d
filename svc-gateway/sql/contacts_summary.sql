-- How many contacts a user ($1) has, the version of her list, a digest of her contacts' own
-- profiles, so GetContacts' hash moves when a contact changes his, and a digest of what
-- decides how much of each contact she may see: whether he keeps her as a contact, and his
-- privacy rules for the keys $2 as they name her (their value, whether she is among their
-- exceptions), so the hash moves when one of these changes what she sees; and the contacts'
-- ids, ascending (primary key of contacts: her range, and each contact's key for her; primary
-- key of users for each contact and for her; primary key of privacy_rules, each contact's).
SELECT count(*) AS count,
       coalesce((SELECT contacts_version FROM users WHERE id = $1), 0) AS version,
       coalesce(bit_xor(hashtextextended(
           concat_ws(chr(31), u.id, u.first_name, u.last_name, u.username, u.about,
                     u.photo_file_id), 0)), 0) AS profiles,
       coalesce(bit_xor(hashtextextended(
           concat_ws(chr(31), u.id, s.keeps_viewer, s.rules), 0)), 0) AS sights,
       coalesce(array_agg(c.contact_user_id ORDER BY c.contact_user_id), '{}') AS ids
FROM contacts c
JOIN users u ON u.id = c.contact_user_id
CROSS JOIN LATERAL (
    SELECT EXISTS (SELECT 1 FROM contacts k
                   WHERE k.owner_id = c.contact_user_id AND k.contact_user_id = $1)
               AS keeps_viewer,
           (SELECT string_agg(concat_ws(':', p.key, p.value, $1 = ANY(p.allow_user_ids),
                                        $1 = ANY(p.deny_user_ids)), ',' ORDER BY p.key)
            FROM privacy_rules p
            WHERE p.user_id = c.contact_user_id AND p.key = ANY($2::smallint[])) AS rules
) AS s
WHERE c.owner_id = $1
