-- What a filter's rules take of a dialog: its categories, $9 contacts and $10 non-contacts
-- (the dialog's contact flag), and its exclusions (sql/filter_exclusions.sql follows, then
-- the closing parenthesis).
((($9 AND contact) OR ($10 AND NOT contact))
 AND
