-- The inbox only has to remember event ids for as long as a replay can come (the relay gives
-- up after max_attempts): older entries are pruned by received_at.
CREATE INDEX inbox_received ON inbox (received_at);
