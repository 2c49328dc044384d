-- A filter's count besides its pinned peers when $15 asks for it (else 0), without reading
-- the list: the dialogs its categories take (sql/filter_count_all.sql), corrected around its
-- peers (sql/filter_count_peers.sql). Each part is a subquery the database runs once, and
-- only when $15 asks for it.
CASE WHEN $15 THEN (CATEGORY_COUNT) + (PEERS_COUNT) ELSE 0 END
