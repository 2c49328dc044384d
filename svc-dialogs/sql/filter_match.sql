-- $6 the filter's pinned peers (listed apart, first), $7 its excluded peers, $8 its included
-- peers: an included peer is in whatever the rules say (sql/filter_rules.sql); an excluded
-- one never is.
NOT peer_user_id = ANY($6::bigint[])
AND NOT peer_user_id = ANY($7::bigint[])
AND (top_message_id > 0 OR top_message_date > 0)
AND (peer_user_id = ANY($8::bigint[]) OR
