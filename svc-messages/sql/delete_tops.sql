-- The newest box left in each dialog a delete touched, and its date (index
-- message_boxes_history, which holds no deleted box): $1 owners and $2 peers side by side.
SELECT d.owner_id, d.peer_user_id,
       coalesce(top.box_id, 0) AS top_id, coalesce(top.date, 0) AS top_date
FROM unnest($1::bigint[], $2::bigint[]) AS d(owner_id, peer_user_id)
LEFT JOIN LATERAL (
    SELECT box_id, date FROM message_boxes
    WHERE owner_id = d.owner_id AND peer_user_id = d.peer_user_id AND NOT deleted
    ORDER BY box_id DESC
    LIMIT 1
) top ON true
