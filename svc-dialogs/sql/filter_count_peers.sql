-- A filter's count, around its peers: of the dialogs of its pinned and excluded peers ($6,
-- $7), how many its rules take (counted by the rules, but listed apart or never); of its
-- included peers' ($8), how many its rules leave (listed all the same). Primary key of
-- dialogs, one probe per peer; the rules follow (sql/filter_rules.sql).
SELECT (count(*) FILTER (WHERE NOT included AND taken))::int AS taken_apart,
       (count(*) FILTER (WHERE included AND NOT taken))::int AS included_besides
FROM (SELECT peer_user_id = ANY($8::bigint[]) AS included,
             coalesce(
