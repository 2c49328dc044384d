       ) ELSE 0 END AS total
FROM dialogs
WHERE owner_id = $1 AND folder_id = $2
  AND (pinned_rank, top_message_date, top_message_id, peer_user_id) < ($3, $4, $5, $6)
  AND ($8 OR top_message_id > 0 OR top_message_date > 0)
ORDER BY pinned_rank DESC, top_message_date DESC, top_message_id DESC, peer_user_id DESC
LIMIT $7
