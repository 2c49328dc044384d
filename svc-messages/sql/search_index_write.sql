-- The indexer's write: the keys of deleted boxes removed and those of live boxes added
-- (primary key of message_words).
WITH removed AS (
    DELETE FROM message_words w
    USING {removed} AS r(owner_id, word, box_id)
    WHERE w.owner_id = r.owner_id AND w.word = r.word AND w.box_id = r.box_id
)
INSERT INTO message_words (owner_id, word, box_id, peer_user_id)
SELECT * FROM {added}
ON CONFLICT DO NOTHING
