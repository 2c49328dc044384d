-- The first statement of a batch of sends, one row per send and owner (a send that takes no
-- box id has one row and no owner). It claims every key, each with a fresh body id (primary
-- key of idempotency_keys, keys ascending, so batches never deadlock on each other; a send
-- whose key a running transaction holds waits here for it to end). For each send that claimed
-- its key and whose reply (if any) the replies pre-pass found, it sees whether the recipient
-- blocked the sender (primary key of blocks) and takes the box ids of every owner at once
-- (primary key of box_sequences, owners ascending). A send whose key was used before, or
-- whose reply names no message of its dialog, takes no box id.
WITH s AS MATERIALIZED (
    SELECT u.*, nextval('message_bodies_id_seq') AS body_id
    FROM {sends} WITH ORDINALITY
        AS u(sender_id, random_id, request_hash, peer_user_id, reply_valid, n)
), claim AS (
    INSERT INTO idempotency_keys (sender_id, random_id, request_hash, body_id)
    SELECT sender_id, random_id, request_hash, body_id FROM s ORDER BY sender_id, random_id
    ON CONFLICT (sender_id, random_id) DO NOTHING
    RETURNING sender_id, random_id
), claimed AS MATERIALIZED (
    SELECT s.n, s.sender_id, s.peer_user_id, s.reply_valid
    FROM s
    JOIN claim c ON c.sender_id = s.sender_id AND c.random_id = s.random_id
), owners AS MATERIALIZED (
    -- A recipient who blocked the sender gets no box: no box id, no event, no push.
    SELECT c.n, o.owner_id
    FROM claimed c
    CROSS JOIN LATERAL (
        SELECT c.sender_id AS owner_id
        UNION ALL
        SELECT c.peer_user_id
        WHERE c.peer_user_id <> c.sender_id AND NOT EXISTS (
            SELECT 1 FROM blocks b
            WHERE b.owner_id = c.peer_user_id AND b.blocked_user_id = c.sender_id)
    ) o
    WHERE c.reply_valid
), seq AS (
    INSERT INTO box_sequences (owner_id, last_box_id)
    SELECT owner_id, count(*) FROM owners GROUP BY owner_id ORDER BY owner_id
    ON CONFLICT (owner_id) DO UPDATE
        SET last_box_id = box_sequences.last_box_id + EXCLUDED.last_box_id
    RETURNING owner_id, last_box_id
)
SELECT s.n,
       s.body_id,
       c.n IS NOT NULL AS claimed,
       coalesce(c.reply_valid, false) AS reply_valid,
       o.owner_id,
       q.last_box_id - count(*) OVER (PARTITION BY o.owner_id)
           + row_number() OVER (PARTITION BY o.owner_id ORDER BY o.n) AS box_id
FROM s
LEFT JOIN claimed c ON c.n = s.n
LEFT JOIN owners o ON o.n = s.n
LEFT JOIN seq q ON q.owner_id = o.owner_id
ORDER BY s.n, o.owner_id
