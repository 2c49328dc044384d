-- A filter's exclusions $12..$14 of muted (mute_until after $15, now), read (no unread
-- message and no unread mark) and archived dialogs.
((NOT $12 OR mute_until <= $15)
 AND (NOT $13 OR unread_count > 0 OR unread_mark)
 AND (NOT $14 OR folder_id = 0))
