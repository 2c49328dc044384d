-- How many dialogs a filter holds besides its pinned peers: the owner's dialogs (primary key
-- of dialogs, its owner prefix) that the filter's rules take (sql/filter_match.sql). $2..$5
-- are the page's and unused here.
SELECT count(*)::int FROM dialogs
WHERE owner_id = $1 AND
