-- The first statement of a DeleteMessages: the owner's boxes with the ids $2 that are not
-- deleted (one probe of the primary key of message_boxes per distinct id), each with whether
-- its peer blocked the owner (primary key of blocks), which forbids a revoke.
SELECT hit.box_id, hit.peer_user_id, hit.body_id,
       hit.peer_user_id <> $1 AND EXISTS (
           SELECT 1 FROM blocks k
           WHERE k.owner_id = hit.peer_user_id AND k.blocked_user_id = $1) AS blocked
FROM (SELECT DISTINCT unnest($2::bigint[]) AS box_id) wanted
CROSS JOIN LATERAL (
    SELECT box_id, peer_user_id, body_id FROM message_boxes
    WHERE owner_id = $1 AND box_id = wanted.box_id AND NOT deleted
    LIMIT 1
) hit
