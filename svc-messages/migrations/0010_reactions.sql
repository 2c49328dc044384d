-- Reactions in private chats: one per user per message. A reaction is on the message, which
-- every owner's box shows alike, so it is keyed by the shared body: every box of the body reads
-- the same rows through the primary key (body_id first), and a user's one reaction to it is a
-- row replaced or deleted. Whether a reaction is unseen is the author's own, so on her box.
CREATE TABLE message_reactions (
    body_id  BIGINT NOT NULL,
    user_id  BIGINT NOT NULL,
    reaction TEXT   NOT NULL,
    -- Unix seconds.
    date     BIGINT NOT NULL,
    PRIMARY KEY (body_id, user_id)
) PARTITION BY HASH (body_id);

DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE message_reactions_p%s PARTITION OF message_reactions FOR VALUES WITH (MODULUS 8, REMAINDER %s)', i, i);
        -- The shared autovacuum policy (applied before this table existed): rows are probed
        -- by primary key and replaced in place.
        EXECUTE format('ALTER TABLE message_reactions_p%s SET (autovacuum_vacuum_threshold = 20000, '
            'autovacuum_analyze_threshold = 20000, autovacuum_vacuum_insert_threshold = 20000)', i);
    END LOOP;
END $$;

ALTER TABLE message_boxes
    ADD COLUMN reaction_unread BOOLEAN NOT NULL DEFAULT false;

-- ReadReactions: an owner's boxes of a dialog with an unseen reaction, few beside her history.
CREATE INDEX message_boxes_reaction_unread ON message_boxes (owner_id, peer_user_id)
    WHERE reaction_unread AND NOT deleted;
