-- The boxes of an edited body that are not deleted, one per owner of $1 (index
-- message_boxes_body): the owners whose view of the message changes.
SELECT hit.*
FROM unnest($1::bigint[]) AS wanted(owner_id)
CROSS JOIN LATERAL (
    SELECT * FROM message_boxes
    WHERE owner_id = wanted.owner_id AND body_id = $2 AND NOT deleted
    LIMIT 1
) hit
