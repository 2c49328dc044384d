-- How many listed dialogs of the owner a filter of every private chat takes, its exclusions
-- ($12..$14 muted, read, archived; $15 now) applied to the owner's dialog_counts rows
-- (primary key, the owner prefix): dialogs muted forever go with muted ones, those muted
-- until a date still ahead are counted apart and taken off (index dialogs_timed_mutes).
SELECT (coalesce((SELECT sum(n) FROM dialog_counts
                  WHERE owner_id = $1 AND (NOT $12 OR mute < 2) AND (NOT $13 OR unread)
                    AND (NOT $14 OR folder_id = 0)), 0)
        - CASE WHEN $12 THEN (SELECT count(*) FROM dialogs
                              WHERE owner_id = $1 AND mute_until > 0
                                AND mute_until < 2147483647 AND mute_until > $15
                                AND (top_message_id > 0 OR top_message_date > 0)
                                AND (NOT $13 OR unread_count > 0 OR unread_mark)
                                AND (NOT $14 OR folder_id = 0))
               ELSE 0 END)::int
