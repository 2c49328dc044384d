-- A dialog's peer settings bar: whether the peer wrote (a message of hers not deleted),
-- whether the owner ever sent one there and whether she hid the bar (primary key of dialogs;
-- dialog_incoming's).
SELECT EXISTS (SELECT 1 FROM dialog_incoming i
               WHERE i.owner_id = $1 AND i.peer_user_id = $2 AND NOT i.deleted) AS peer_wrote,
       owner_wrote,
       settings_bar_hidden
FROM dialogs WHERE owner_id = $1 AND peer_user_id = $2
