-- Search of message text: a trigram index on the bodies answers case-insensitive substring
-- matches (`text ILIKE '%q%'`) of three characters or more without reading every body. The
-- extension lands in this service's schema, the first of its search_path.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE INDEX message_bodies_text_trgm ON message_bodies USING gin (text gin_trgm_ops);
