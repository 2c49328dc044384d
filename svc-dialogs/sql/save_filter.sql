-- A dialog filter made or edited: a new one goes last in the owner's order, an edited one
-- keeps its place (primary key of dialog_filters).
INSERT INTO dialog_filters AS f (owner_id, filter_id, position, filter)
VALUES ($1, $2,
        (SELECT coalesce(max(position), 0) + 1 FROM dialog_filters WHERE owner_id = $1), $3)
ON CONFLICT (owner_id, filter_id) DO UPDATE SET filter = EXCLUDED.filter
