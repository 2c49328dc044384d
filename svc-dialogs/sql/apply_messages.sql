-- New messages: incoming ones recorded ($5..$8; primary key of dialog_incoming, so a message
-- already recorded does not count twice), and each dialog's top message and unread count
-- moved once ($1..$4), creating the dialogs that are missing. The dialogs are upserted in key
-- order by primary key (an UPDATE … FROM UNNEST would hash-join a scan of every partition); a
-- message counts as unread only above the dialog's read watermark, and not at all when a
-- delete applied before it recorded it deleted (its row is there: nothing is inserted). A
-- message at or below the dialog's delete boundary does not move the top: the delete that
-- set the boundary saw it, and named the top with it in mind. $9: the owner sent one of them.
WITH arrived AS (
    INSERT INTO dialog_incoming (owner_id, peer_user_id, box_id, peer_box_id)
    SELECT * FROM UNNEST($5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
    ON CONFLICT DO NOTHING RETURNING owner_id, peer_user_id, box_id
)
INSERT INTO dialogs AS d (owner_id, peer_user_id, top_message_id, top_message_date, unread_count,
                         owner_wrote)
SELECT t.owner_id, t.peer_user_id, t.top_id, t.top_date,
       (SELECT count(*) FROM arrived a
        WHERE a.owner_id = t.owner_id AND a.peer_user_id = t.peer_user_id)::int,
       t.wrote
FROM UNNEST($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $9::bool[])
    AS t(owner_id, peer_user_id, top_id, top_date, wrote)
ORDER BY 1, 2
ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET
    top_message_id = CASE WHEN EXCLUDED.top_message_id > GREATEST(d.top_message_id, d.delete_boundary)
        THEN EXCLUDED.top_message_id ELSE d.top_message_id END,
    top_message_date = CASE WHEN EXCLUDED.top_message_id > GREATEST(d.top_message_id, d.delete_boundary)
        THEN EXCLUDED.top_message_date ELSE d.top_message_date END,
    owner_wrote = d.owner_wrote OR EXCLUDED.owner_wrote,
    unread_count = d.unread_count + (SELECT count(*) FROM arrived a
        WHERE a.owner_id = d.owner_id AND a.peer_user_id = d.peer_user_id
          AND a.box_id > d.read_inbox_max_id)::int
