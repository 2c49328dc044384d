-- A filter's count besides its pinned peers when $16 asks for it (else 0), without reading
-- the list: the dialogs its rules take, by its categories ($9 contacts, $10 non-contacts) from
-- sql/filter_count_all.sql and sql/filter_count_contacts.sql, then corrected around its peers
-- (sql/filter_count_peers.sql). Each part is a subquery the database runs once, and only
-- when the case it stands in needs it.
CASE WHEN $16 THEN (
    CASE WHEN $9 AND $10 THEN (ALL_COUNT)
         WHEN $9 THEN (CONTACTS_COUNT)
         WHEN $10 THEN (ALL_COUNT) - (CONTACTS_COUNT)
         ELSE 0 END
    + (PEERS_COUNT))
ELSE 0 END
