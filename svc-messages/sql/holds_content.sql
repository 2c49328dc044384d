-- Whether the owner's box holds a message carrying this content: the bodies with it
-- (message_bodies_media_sha256), each probed for the owner's box (message_boxes_body).
SELECT EXISTS (
    SELECT 1
    FROM message_bodies m
    JOIN message_boxes b ON b.owner_id = $1 AND b.body_id = m.id AND NOT b.deleted
    WHERE m.media_sha256 = $2 AND m.media_sha256 <> ''
)
