-- An owner's boxes with the ids $2: one probe of the primary key of message_boxes per
-- distinct id (a scan of the owner's boxes filtered by the ids would grow with her whole
-- history).
SELECT hit.*
FROM (SELECT DISTINCT unnest($2::bigint[]) AS box_id) wanted
CROSS JOIN LATERAL (
    SELECT * FROM message_boxes
    WHERE owner_id = $1 AND box_id = wanted.box_id AND NOT deleted
    LIMIT 1
) hit
