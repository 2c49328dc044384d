-- The first statement of a ReadMessageContents: the caller's boxes $2 that she received and has
-- not played stop being media_unread (primary key of message_boxes), and so does the sender's
-- box of each of those messages (index message_boxes_body: the sender, who is the peer of an
-- incoming box, and the body). Every box that changed, owner by owner. A box already played,
-- deleted or not the caller's is not returned, so a repeat changes nothing; a concurrent call
-- for the same boxes waits on their row locks and then finds them played.
WITH mine AS (
    UPDATE message_boxes SET media_unread = false
    WHERE owner_id = $1 AND box_id = ANY($2) AND media_unread AND NOT out AND NOT deleted
    RETURNING box_id, body_id, peer_user_id
), senders AS (
    UPDATE message_boxes b SET media_unread = false
    FROM mine
    WHERE b.owner_id = mine.peer_user_id AND b.body_id = mine.body_id
      AND b.media_unread AND NOT b.deleted
    RETURNING b.owner_id, b.box_id
)
SELECT $1::bigint AS owner_id, box_id FROM mine
UNION ALL
SELECT owner_id, box_id FROM senders
ORDER BY owner_id, box_id
