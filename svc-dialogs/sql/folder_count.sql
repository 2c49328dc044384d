-- How many dialogs a folder lists (index dialogs_folder_order, its (owner, folder) prefix).
SELECT count(*)::int FROM dialogs
WHERE owner_id = $1 AND folder_id = $2 AND (top_message_id > 0 OR top_message_date > 0)
