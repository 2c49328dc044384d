-- Of the owner's contacts ($11), how many have a listed dialog the filter's exclusions leave
-- (sql/filter_exclusions.sql follows): primary key of dialogs, one probe per contact.
SELECT count(*)::int FROM dialogs
WHERE owner_id = $1 AND peer_user_id = ANY($11::bigint[])
  AND (top_message_id > 0 OR top_message_date > 0) AND
