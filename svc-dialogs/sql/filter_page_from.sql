       AS total
FROM dialogs
WHERE owner_id = $1 AND (top_message_date, top_message_id, peer_user_id) < ($2, $3, $4) AND
