-- The owner's dialog filters take the places $3 (filters $2; primary key of dialog_filters).
UPDATE dialog_filters f SET position = t.position
FROM UNNEST($2::int[], $3::int[]) AS t(filter_id, position)
WHERE f.owner_id = $1 AND f.filter_id = t.filter_id
