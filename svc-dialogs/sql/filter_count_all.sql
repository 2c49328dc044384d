-- How many listed dialogs of the owner a filter's categories take ($9 contacts, $10
-- non-contacts), its exclusions ($11..$13 muted, read, archived; $14 now) applied to the
-- owner's dialog_counts rows (primary key, the owner prefix): dialogs muted forever go with
-- muted ones, those muted until a date still ahead are counted apart and taken off (index
-- dialogs_timed_mutes).
SELECT (coalesce((SELECT sum(n) FROM dialog_counts
                  WHERE owner_id = $1 AND (($9 AND contact) OR ($10 AND NOT contact))
                    AND (NOT $11 OR mute < 2) AND (NOT $12 OR unread)
                    AND (NOT $13 OR folder_id = 0)), 0)
        - CASE WHEN $11 THEN (SELECT count(*) FROM dialogs
                              WHERE owner_id = $1 AND mute_until > 0
                                AND mute_until < 2147483647 AND mute_until > $14
                                AND (top_message_id > 0 OR top_message_date > 0)
                                AND (($9 AND contact) OR ($10 AND NOT contact))
                                AND (NOT $12 OR unread_count > 0 OR unread_mark)
                                AND (NOT $13 OR folder_id = 0))
               ELSE 0 END)::int
