-- A delete in one dialog (primary keys of dialog_incoming and dialogs): $1 owner, $2 peer,
-- $3 the deleted incoming ids, $4/$5 the newest message left and its date, $6 the boundary
-- that top holds for, $7 whether an empty dialog leaves the list, $8 the delete's date.
-- The incoming ids are marked deleted (recorded deleted when their message is not applied
-- yet); those that counted as unread (above the read watermark) stop counting. The top
-- becomes the one the delete saw unless a delete with a higher boundary was applied already
-- (its top is newer) or the top is above the boundary (a message committed after the delete);
-- an empty dialog keeps its place in the list (just_clear) or leaves it (date 0).
WITH marked AS (
    INSERT INTO dialog_incoming AS i (owner_id, peer_user_id, box_id, peer_box_id, deleted)
    SELECT $1, $2, id, 0, true FROM unnest($3::bigint[]) AS id ORDER BY id
    ON CONFLICT (owner_id, peer_user_id, box_id) DO UPDATE SET deleted = true
    WHERE NOT i.deleted
    -- Updated rows (xmax set) were applied messages; inserted ones never counted.
    RETURNING i.box_id, i.xmax <> 0 AS counted
)
INSERT INTO dialogs AS d (owner_id, peer_user_id, top_message_id, top_message_date,
                          delete_boundary)
VALUES ($1, $2, $4, CASE WHEN $4 > 0 THEN $5 WHEN $7 THEN 0 ELSE $8 END, $6)
ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET
    unread_count = GREATEST(0, d.unread_count - (SELECT count(*) FROM marked m
        WHERE m.counted AND m.box_id > d.read_inbox_max_id)::int),
    top_message_id = CASE WHEN $6 > d.delete_boundary AND d.top_message_id <= $6
        THEN $4 ELSE d.top_message_id END,
    top_message_date = CASE WHEN $6 > d.delete_boundary AND d.top_message_id <= $6
        THEN CASE WHEN $4 > 0 THEN $5 WHEN $7 THEN 0 ELSE d.top_message_date END
        ELSE d.top_message_date END,
    delete_boundary = GREATEST(d.delete_boundary, $6)
