-- A filter's exclusions $11..$13 of muted (mute_until after $14, now), read (no unread
-- message and no unread mark) and archived dialogs.
((NOT $11 OR mute_until <= $14)
 AND (NOT $12 OR unread_count > 0 OR unread_mark)
 AND (NOT $13 OR folder_id = 0))
