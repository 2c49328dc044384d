-- The search benchmark's data, straight into the schema: $1 owner, $2 her messages, $3 her
-- peers, $4 messages of other pairs of users, $5 the vocabulary. Each text is eight words of
-- the vocabulary, skewed towards its first words like a language; half of a dialog's messages
-- are the owner's. Every body has its two boxes; box ids follow the body id.
WITH bodies AS (
    INSERT INTO message_bodies (id, sender_id, recipient_id, text, date)
    SELECT g,
           CASE
               WHEN g > $2 THEN 1000000 + (g % 1000) * 2 + (g % 2)
               WHEN g % 2 = 0 THEN $1
               ELSE $1 + 1 + g % $3
           END,
           CASE
               WHEN g > $2 THEN 1000000 + (g % 1000) * 2 + 1 - (g % 2)
               WHEN g % 2 = 0 THEN $1 + 1 + g % $3
               ELSE $1
           END,
           (SELECT string_agg($5[1 + floor(power(random(), 2) * array_length($5, 1))::int], ' ')
            FROM generate_series(1, 8 + 0 * g)),
           1700000000 + g
    FROM generate_series(1, $2 + $4) g
    RETURNING id, sender_id, date
)
INSERT INTO message_boxes (owner_id, box_id, peer_user_id, body_id, out, date)
SELECT side.owner_id, b.id, side.peer_user_id, b.id, side.owner_id = b.sender_id, b.date
FROM bodies b
CROSS JOIN LATERAL (
    SELECT CASE WHEN b.id > $2 THEN 1000000 + (b.id % 1000) * 2 ELSE $1 END AS a,
           CASE WHEN b.id > $2 THEN 1000000 + (b.id % 1000) * 2 + 1 ELSE $1 + 1 + b.id % $3 END AS z
) pair
CROSS JOIN LATERAL (VALUES (pair.a, pair.z), (pair.z, pair.a)) side(owner_id, peer_user_id)
