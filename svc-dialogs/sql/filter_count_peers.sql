-- A filter's count, around its peers: of the dialogs of its included peers ($8), those its
-- rules leave (listed all the same), less, of its pinned and excluded peers' ($6, $7), those
-- its rules take (counted by the rules, but listed apart or never). Primary key of dialogs,
-- one probe per peer; the rules follow (sql/filter_rules.sql).
SELECT (count(*) FILTER (WHERE included AND NOT taken)
        - count(*) FILTER (WHERE NOT included AND taken))::int
FROM (SELECT peer_user_id = ANY($8::bigint[]) AS included,
             coalesce(
