-- One page of an owner's dialogs in a folder after the seek key, its pinned dialogs first in
-- their order, then newest first (index dialogs_folder_order). A dialog without a message
-- yet (only a watermark or a setting arrived), or whose messages were all deleted (date 0),
-- is left out unless $8 asks for it; one cleared with just_clear stays, empty (top id 0).
SELECT peer_user_id, top_message_id, top_message_date, read_inbox_max_id, read_outbox_max_id,
       unread_count, delivered_outbox_max_id, folder_id, pinned_rank, unread_mark, mute_until,
       show_previews, silent, draft, settings_bar_hidden
FROM dialogs
WHERE owner_id = $1 AND folder_id = $2
  AND (pinned_rank, top_message_date, top_message_id, peer_user_id) < ($3, $4, $5, $6)
  AND ($8 OR top_message_id > 0 OR top_message_date > 0)
ORDER BY pinned_rank DESC, top_message_date DESC, top_message_id DESC, peer_user_id DESC
LIMIT $7
