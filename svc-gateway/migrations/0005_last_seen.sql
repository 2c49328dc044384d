-- Each user's last time online, written when she goes offline. Redis holds who is online now
-- (it can be rebuilt from the streams and the next calls); this is what cannot.

CREATE TABLE last_seen (
    user_id    BIGINT      PRIMARY KEY REFERENCES users (id),
    was_online TIMESTAMPTZ NOT NULL
);
