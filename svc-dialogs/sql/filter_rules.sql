-- What a filter's rules take of a dialog: its categories, $9 contacts and $10 non-contacts of
-- $11 the owner's contacts, and its exclusions (sql/filter_exclusions.sql follows, then the
-- closing parenthesis). The contacts, which may be thousands, are looked up in a hashed
-- subplan, built once a query.
((($9 AND peer_user_id IN (SELECT unnest($11::bigint[])))
  OR ($10 AND peer_user_id NOT IN (SELECT unnest($11::bigint[]))))
 AND
