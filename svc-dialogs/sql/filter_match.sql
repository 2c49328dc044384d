-- $6 the filter's pinned peers (listed apart, first), $7 its excluded peers, $8 its included
-- peers, $9 contacts, $10 non-contacts, $11 the owner's contacts, $12..$14 the exclusions of
-- muted (mute_until after $15, now), read (no unread message and no unread mark) and archived
-- dialogs. An included peer is in whatever the exclusions say; an excluded one never is. The
-- contacts, which may be thousands, are looked up in a hashed subplan, built once a query.
NOT peer_user_id = ANY($6::bigint[])
AND NOT peer_user_id = ANY($7::bigint[])
AND (top_message_id > 0 OR top_message_date > 0)
AND (peer_user_id = ANY($8::bigint[])
     OR ((($9 AND peer_user_id IN (SELECT unnest($11::bigint[])))
          OR ($10 AND peer_user_id NOT IN (SELECT unnest($11::bigint[]))))
         AND (NOT $12 OR mute_until <= $15)
         AND (NOT $13 OR unread_count > 0 OR unread_mark)
         AND (NOT $14 OR folder_id = 0)))
