-- A user's one reaction to a body, set or replaced (primary key of message_reactions), and the
-- body marked as reacted to once (primary key of message_bodies; the caller holds its lock).
WITH marked AS (
    UPDATE message_bodies SET reacted = true WHERE id = $1 AND NOT reacted
)
INSERT INTO message_reactions (body_id, user_id, reaction, date)
VALUES ($1, $2, $3, $4)
ON CONFLICT (body_id, user_id) DO UPDATE SET reaction = EXCLUDED.reaction, date = EXCLUDED.date
