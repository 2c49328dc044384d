-- Adds contacts of owner $1, or renames them; returns those added or renamed (primary key of
-- contacts). A contact given twice in $2 takes its last names.
INSERT INTO contacts (owner_id, contact_user_id, first_name, last_name)
SELECT DISTINCT ON (c.user_id) $1, c.user_id, c.first_name, c.last_name
FROM unnest($2::bigint[], $3::text[], $4::text[]) WITH ORDINALITY
     AS c (user_id, first_name, last_name, n)
ORDER BY c.user_id, c.n DESC
ON CONFLICT (owner_id, contact_user_id) DO UPDATE
SET first_name = excluded.first_name, last_name = excluded.last_name
WHERE (contacts.first_name, contacts.last_name)
      IS DISTINCT FROM (excluded.first_name, excluded.last_name)
RETURNING contact_user_id, first_name, last_name
