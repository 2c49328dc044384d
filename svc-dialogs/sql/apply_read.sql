-- A read from the owner's log: her watermark moves up to $3 and her unread count becomes $4;
-- a read takes her unread mark away.
-- Returns, when the dialog exists, the highest of the messages newly read in the peer's own
-- ids (primary key of dialogs; dialog_incoming's for the peer's ids).
WITH before AS (
    SELECT read_inbox_max_id FROM dialogs
    WHERE owner_id = $1 AND peer_user_id = $2 FOR UPDATE
), moved AS (
    UPDATE dialogs d SET read_inbox_max_id = GREATEST(d.read_inbox_max_id, $3),
                         unread_count = $4, unread_mark = false
    FROM before
    WHERE d.owner_id = $1 AND d.peer_user_id = $2
    RETURNING before.read_inbox_max_id AS was
)
SELECT (SELECT max(i.peer_box_id) FROM dialog_incoming i
        WHERE i.owner_id = $1 AND i.peer_user_id = $2
          AND i.box_id > moved.was AND i.box_id <= $3)
FROM moved
