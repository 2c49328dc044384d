-- Whether anyone ever reacted to a body. A message read looks its body's reactions up only
-- when it did: nearly every body has none, and each lookup is a probe of a partitioned table
-- (partitions pruned per probe) that a page of messages would otherwise make per message.
-- Set with a body's first reaction and never cleared: a body whose reactions were all removed
-- is looked up and found to have none.
ALTER TABLE message_bodies ADD COLUMN reacted BOOLEAN NOT NULL DEFAULT false;

UPDATE message_bodies SET reacted = true
WHERE id IN (SELECT DISTINCT body_id FROM message_reactions);
