-- An owner's dialogs with the given peers, listed or not (primary key of dialogs).
SELECT peer_user_id, top_message_id, top_message_date, read_inbox_max_id, read_outbox_max_id,
       unread_count, delivered_outbox_max_id, folder_id, pinned_rank, unread_mark, mute_until,
       show_previews, silent, draft, settings_bar_hidden, unread_reactions_count
FROM dialogs
WHERE owner_id = $1 AND peer_user_id = ANY($2::bigint[])
