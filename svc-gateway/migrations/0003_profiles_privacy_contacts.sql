-- Profiles (names, username, about, photo), privacy rules and contacts.

ALTER TABLE users
    ADD COLUMN last_name        TEXT   NOT NULL DEFAULT '',
    -- As its owner typed it; unique whatever its case.
    ADD COLUMN username         TEXT,
    ADD COLUMN about            TEXT   NOT NULL DEFAULT '',
    -- A file reference of the owner's in svc-media; 0 when she has no photo.
    ADD COLUMN photo_file_id    BIGINT NOT NULL DEFAULT 0,
    -- Moves on every change of the user's contacts: GetContacts' hash.
    ADD COLUMN contacts_version BIGINT NOT NULL DEFAULT 0;
-- ResolveUsername, and uniqueness whatever the case.
CREATE UNIQUE INDEX users_username ON users (lower(username)) WHERE username IS NOT NULL;

-- A user's privacy rule per key (1 phone number, 2 last seen, 3 profile photo, 4 find by
-- phone); a key without a row has its default. value: 1 everybody, 2 contacts, 3 nobody.
CREATE TABLE privacy_rules (
    user_id        BIGINT   NOT NULL REFERENCES users (id),
    key            SMALLINT NOT NULL,
    value          SMALLINT NOT NULL,
    allow_user_ids BIGINT[] NOT NULL DEFAULT '{}',
    deny_user_ids  BIGINT[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (user_id, key)
);

-- The users a user keeps as contacts, under her own names for them. Whether a contact keeps
-- her too is the same key read the other way round.
CREATE TABLE contacts (
    owner_id        BIGINT      NOT NULL REFERENCES users (id),
    contact_user_id BIGINT      NOT NULL REFERENCES users (id),
    first_name      TEXT        NOT NULL,
    last_name       TEXT        NOT NULL DEFAULT '',
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (owner_id, contact_user_id)
);
