-- A page of owner $1's contacts after user id $2, ascending (primary key of contacts).
SELECT contact_user_id
FROM contacts
WHERE owner_id = $1 AND contact_user_id > $2
ORDER BY contact_user_id
LIMIT $3
