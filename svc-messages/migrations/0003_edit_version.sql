-- How many times a body was edited: each edit's events get ids derived from it, so a replayed
-- hand-off of one edit is found again and two edits in the same second stay two facts.
ALTER TABLE message_bodies ADD COLUMN edit_version INT NOT NULL DEFAULT 0;
