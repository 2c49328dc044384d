-- Search of an owner's message text. A body names its sender; it now also names the user it
-- was sent to, so that the two users whose boxes may hold it are known from the body alone.
-- One GIN index holds both those owners and the text's trigrams: a search looks up the
-- bodies of one owner containing a text (`ILIKE '%q%'`, three characters or more) in one
-- scan, whatever other owners' messages say. The extension lands in this service's schema,
-- the first of its search_path.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

ALTER TABLE message_bodies ADD COLUMN recipient_id BIGINT NOT NULL DEFAULT 0;
UPDATE message_bodies m SET recipient_id = bx.peer_user_id
FROM message_boxes bx
WHERE bx.owner_id = m.sender_id AND bx.body_id = m.id;

CREATE INDEX message_bodies_search ON message_bodies
    USING gin ((ARRAY[sender_id, recipient_id]), text gin_trgm_ops);

-- A finer sample of texts, so that the planner tells a rare text (looked up in the index)
-- from a common one (found soon among the owner's newest boxes).
ALTER TABLE message_bodies ALTER COLUMN text SET STATISTICS 1000;
