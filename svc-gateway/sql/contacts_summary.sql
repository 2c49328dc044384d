-- How many contacts a user ($1) has, the version of her list, and a digest of her contacts'
-- own profiles, so GetContacts' hash moves when a contact changes his (primary key of
-- contacts: her range; primary key of users for each contact and for her).
SELECT count(*) AS count,
       coalesce((SELECT contacts_version FROM users WHERE id = $1), 0) AS version,
       coalesce(bit_xor(hashtextextended(
           concat_ws(chr(31), u.id, u.first_name, u.last_name, u.username, u.about,
                     u.photo_file_id), 0)), 0) AS profiles
FROM contacts c
JOIN users u ON u.id = c.contact_user_id
WHERE c.owner_id = $1
