-- A search's candidates: the owner's boxes indexed under a key beginning with the query's
-- lead, newest first, at most $6 of them below the seek key $5 (and of dialog $2 unless 0).
-- The distinct keys of the range are visited one by one, each by one descent of the primary
-- key of message_words, and each key's newest boxes read from it in order (the dialog is in
-- the index, so that no row is read to filter by it): the cost follows the keys and the page,
-- not how many of the owner's messages hold the word.
-- $1 owner, $2 peer (0 = any), $3 lead, $4 the first string after the lead's range.
WITH RECURSIVE keys AS (
    SELECT (SELECT min(word) FROM message_words
            WHERE owner_id = $1 AND word >= $3 AND word < $4) AS word
    UNION ALL
    SELECT (SELECT min(word) FROM message_words
            WHERE owner_id = $1 AND word > k.word AND word < $4)
    FROM keys k
    WHERE k.word IS NOT NULL
)
SELECT c.box_id
FROM keys k
CROSS JOIN LATERAL (
    SELECT box_id FROM message_words
    WHERE owner_id = $1 AND word = k.word AND box_id < $5 AND ($2 = 0 OR peer_user_id = $2)
    ORDER BY box_id DESC
    LIMIT $6
) c
WHERE k.word IS NOT NULL
ORDER BY c.box_id DESC
LIMIT $6
