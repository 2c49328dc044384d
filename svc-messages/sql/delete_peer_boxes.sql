-- A revoke: each other owner's box of the deleted bodies that is not deleted yet (index
-- message_boxes_body), $1 owners and $2 bodies side by side.
SELECT hit.owner_id, hit.box_id
FROM unnest($1::bigint[], $2::bigint[]) AS wanted(owner_id, body_id)
CROSS JOIN LATERAL (
    SELECT owner_id, box_id FROM message_boxes
    WHERE owner_id = wanted.owner_id AND body_id = wanted.body_id AND NOT deleted
    LIMIT 1
) hit
