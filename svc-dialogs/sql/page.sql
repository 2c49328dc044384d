-- One page of an owner's dialogs in a folder after the seek key, its pinned dialogs first in
-- their order, then newest first (index dialogs_folder_order). A dialog without a message
-- yet (only a watermark or a setting arrived), or whose messages were all deleted (date 0),
-- is left out unless $8 asks for it; one cleared with just_clear stays, empty (top id 0).
-- With $9, each row also carries the folder's count (sql/folder_count.sql, read once): the
-- page and its count are one statement, so one snapshot.
SELECT peer_user_id, top_message_id, top_message_date, read_inbox_max_id, read_outbox_max_id,
       unread_count, delivered_outbox_max_id, folder_id, pinned_rank, unread_mark, mute_until,
       show_previews, silent, draft, settings_bar_hidden, unread_reactions_count,
       CASE WHEN $9 THEN (
