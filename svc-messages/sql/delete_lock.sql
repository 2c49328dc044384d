-- The owners' box sequences, locked until the delete commits, owners ascending as a send
-- locks them (primary key of box_sequences). A send takes its box ids under the same lock and
-- holds it until it commits, so every box up to the last id handed out (returned here) is
-- committed, and every later one commits after the delete: the delete's events say where
-- that boundary is, and two deletes of one owner never interleave.
SELECT owner_id, last_box_id
FROM box_sequences
WHERE owner_id = ANY($1)
ORDER BY owner_id
FOR UPDATE
