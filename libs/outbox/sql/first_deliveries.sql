-- Records received event ids; returns those received for the first time (primary key of
-- inbox).
INSERT INTO inbox (event_id)
SELECT * FROM UNNEST($1::uuid[])
ON CONFLICT DO NOTHING
RETURNING event_id
