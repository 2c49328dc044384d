-- One page of the dialogs a filter holds besides its pinned peers, after the seek key,
-- newest first (index dialogs_order, read until the page is full), then the filter's rules
-- (sql/filter_match.sql, sql/filter_rules.sql); each row also carries the filter's count
-- when $15 asks for it (read once): the page and its count are one statement, one snapshot.
SELECT peer_user_id, top_message_id, top_message_date, read_inbox_max_id, read_outbox_max_id,
       unread_count, delivered_outbox_max_id, folder_id, pinned_rank, unread_mark, mute_until,
       show_previews, silent, draft, settings_bar_hidden, unread_reactions_count,
