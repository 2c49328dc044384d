-- What a filter's rules take of a dialog: its categories, $9 contacts and $10 non-contacts of
-- $11 the owner's contacts, less the exclusions $12..$14 of muted (mute_until after $15,
-- now), read (no unread message and no unread mark) and archived dialogs. The contacts,
-- which may be thousands, are looked up in a hashed subplan, built once a query.
((($9 AND peer_user_id IN (SELECT unnest($11::bigint[])))
  OR ($10 AND peer_user_id NOT IN (SELECT unnest($11::bigint[]))))
 AND (NOT $12 OR mute_until <= $15)
 AND (NOT $13 OR unread_count > 0 OR unread_mark)
 AND (NOT $14 OR folder_id = 0))
