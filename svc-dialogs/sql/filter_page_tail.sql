)
ORDER BY top_message_date DESC, top_message_id DESC, peer_user_id DESC
LIMIT $5
