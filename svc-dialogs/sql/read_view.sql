-- The reader's position, her watermark, the message the read goes up to ($3 = 0: the top
-- message) and the messages above it that are not deleted, in one snapshot (primary keys of
-- log_positions, dialogs, dialog_incoming). A dialog not applied yet reads as empty.
WITH d AS (
    SELECT coalesce(max(read_inbox_max_id), 0) AS read_inbox_max_id,
           CASE WHEN $3 = 0 THEN coalesce(max(top_message_id), 0)
                ELSE LEAST($3, coalesce(max(top_message_id), 0)) END AS target
    FROM dialogs WHERE owner_id = $1 AND peer_user_id = $2
)
SELECT coalesce((SELECT pts FROM log_positions WHERE owner_id = $1), 0) AS position,
       d.read_inbox_max_id, d.target,
       (SELECT count(*) FROM dialog_incoming i
        WHERE i.owner_id = $1 AND i.peer_user_id = $2 AND i.box_id > d.target
          AND NOT i.deleted) AS still_unread
FROM d
