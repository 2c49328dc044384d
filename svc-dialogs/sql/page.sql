-- One page of an owner's dialogs after the seek key, newest first (index dialogs_order).
-- A dialog without a message yet (only a watermark arrived), or whose messages were all
-- deleted (date 0), is left out; one cleared with just_clear stays, empty (top id 0).
SELECT peer_user_id, top_message_id, top_message_date, read_inbox_max_id,
       read_outbox_max_id, unread_count, delivered_outbox_max_id
FROM dialogs
WHERE owner_id = $1 AND (top_message_date, top_message_id, peer_user_id) < ($2, $3, $4)
  AND (top_message_id > 0 OR top_message_date > 0)
ORDER BY top_message_date DESC, top_message_id DESC, peer_user_id DESC
LIMIT $5
