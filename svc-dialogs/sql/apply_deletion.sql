-- A delete in one dialog (primary keys of dialog_incoming and dialogs): $1 owner, $2 peer,
-- $3 the deleted incoming ids, $4/$5 the newest message left and its date, $6 the boundary
-- that top holds for, $7 whether an empty dialog leaves the list, $8 the delete's date, $9
-- how many deleted boxes held an unread reaction (they stop counting, as a delta would).
-- The incoming ids are marked deleted (recorded deleted when their message is not applied
-- yet); those that counted as unread (above the read watermark) stop counting. The top moves
-- to the one the delete saw when it is at or below the boundary (above it is a message
-- committed after the delete) and the delete is newer than the last one applied: a higher
-- boundary, or the same boundary (no box between the two) and a lower top (it deleted more).
-- A delete older than one applied already leaves the top to it. An empty dialog keeps its
-- place in the list (just_clear) or leaves it (date 0).
WITH applied AS (
    -- The messages applied already (the statement's snapshot precedes the marking below).
    SELECT box_id FROM dialog_incoming
    WHERE owner_id = $1 AND peer_user_id = $2 AND box_id = ANY($3) AND NOT deleted
), marked AS (
    INSERT INTO dialog_incoming AS i (owner_id, peer_user_id, box_id, peer_box_id, deleted)
    SELECT $1, $2, id, 0, true FROM unnest($3::bigint[]) AS id ORDER BY id
    ON CONFLICT (owner_id, peer_user_id, box_id) DO UPDATE SET deleted = true
    WHERE NOT i.deleted
    RETURNING i.box_id
), counted AS (
    -- Those that counted as unread until now; a message recorded deleted never counted.
    SELECT m.box_id FROM marked m JOIN applied a ON a.box_id = m.box_id
)
INSERT INTO dialogs AS d (owner_id, peer_user_id, top_message_id, top_message_date,
                          delete_boundary, unread_reactions_count)
VALUES ($1, $2, $4, CASE WHEN $4 > 0 THEN $5 WHEN $7 THEN 0 ELSE $8 END, $6, -$9::int)
ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET
    unread_reactions_count = d.unread_reactions_count - $9::int,
    unread_count = GREATEST(0, d.unread_count - (SELECT count(*) FROM counted c
        WHERE c.box_id > d.read_inbox_max_id)::int),
    top_message_id = CASE
        WHEN d.top_message_id <= $6 AND ($6 > d.delete_boundary
            OR ($6 = d.delete_boundary AND $4 < d.top_message_id))
        THEN $4 ELSE d.top_message_id END,
    top_message_date = CASE
        WHEN d.top_message_id <= $6 AND ($6 > d.delete_boundary
            OR ($6 = d.delete_boundary AND $4 < d.top_message_id))
        THEN CASE WHEN $4 > 0 THEN $5 WHEN $7 THEN 0 ELSE d.top_message_date END
        ELSE d.top_message_date END,
    delete_boundary = GREATEST(d.delete_boundary, $6)
