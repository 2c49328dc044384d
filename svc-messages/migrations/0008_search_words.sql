-- Search by words, per owner. A body's words are written for each owner's box by the search
-- indexer, after the send commits: a send only queues its boxes (search_queue), so that the
-- send pays for a small row per owner instead of a key per word. A search reads the owner's
-- entries of one word newest first (primary key of message_words, which carries the dialog
-- too), so that its cost follows the page, not how many of her messages hold the word; it
-- also tests the bodies still queued. `word` sorts by code point (collation "C"), so that
-- the keys beginning with a prefix are one range of the key.
CREATE TABLE message_words (
    owner_id     BIGINT NOT NULL,
    word         TEXT COLLATE "C" NOT NULL,
    box_id       BIGINT NOT NULL,
    peer_user_id BIGINT NOT NULL,
    PRIMARY KEY (owner_id, word, box_id) INCLUDE (peer_user_id)
);

-- Boxes whose keys are not (or no longer) what their body's text says: new, edited, or
-- deleted, one row per owner and body. A search reads its owner's rows (the primary key's
-- range); the indexer takes any rows, and the age of the oldest says how far behind it is.
CREATE TABLE search_queue (
    owner_id  BIGINT NOT NULL,
    body_id   BIGINT NOT NULL,
    queued_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, body_id)
);

-- Every box written before words were indexed.
INSERT INTO search_queue (owner_id, body_id)
SELECT owner_id, body_id FROM message_boxes WHERE NOT deleted;

-- The trigram index searched texts by substring; the words replace it, and sends no longer
-- pay for it.
DROP INDEX message_bodies_search;
ALTER TABLE message_bodies ALTER COLUMN text SET STATISTICS -1;
