-- The senders of the owner's messages in a range of her box ids, each with the highest of
-- those messages in the sender's own ids (index dialog_incoming_by_box).
SELECT peer_user_id, max(peer_box_id) AS peer_max
FROM dialog_incoming
WHERE owner_id = $1 AND box_id > $2 AND box_id <= $3
GROUP BY peer_user_id
ORDER BY peer_user_id
LIMIT $4
