-- Each owner's box of a body (index message_boxes_body): the original of a replayed send.
SELECT hit.*
FROM {bodies} AS wanted(owner_id, body_id)
CROSS JOIN LATERAL (
    SELECT * FROM message_boxes
    WHERE owner_id = wanted.owner_id AND body_id = wanted.body_id
    LIMIT 1
) hit
