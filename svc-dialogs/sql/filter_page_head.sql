-- One page of the dialogs a filter holds besides its pinned peers, after the seek key,
-- newest first (index dialogs_order, read until the page is full), then the filter's rules
-- (sql/filter_match.sql, sql/filter_rules.sql).
SELECT peer_user_id, top_message_id, top_message_date, read_inbox_max_id, read_outbox_max_id,
       unread_count, delivered_outbox_max_id, folder_id, pinned_rank, unread_mark, mute_until,
       show_previews, silent, draft, settings_bar_hidden
FROM dialogs
WHERE owner_id = $1 AND (top_message_date, top_message_id, peer_user_id) < ($2, $3, $4) AND
