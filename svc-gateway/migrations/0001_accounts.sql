-- Accounts, auth keys (one per device) and login codes.

CREATE TABLE users (
    id         BIGSERIAL   PRIMARY KEY,
    phone      TEXT        NOT NULL UNIQUE,
    first_name TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- An auth key is a device's identity; signing in binds it to a user (user_id), logging out
-- unbinds it. Only a hash of the secret is kept.
CREATE TABLE auth_keys (
    id           BIGINT      PRIMARY KEY,
    secret_hash  BYTEA       NOT NULL,
    user_id      BIGINT      REFERENCES users (id),
    device_model TEXT        NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    bound_at     TIMESTAMPTZ
);
-- A user's authorizations (devices).
CREATE INDEX auth_keys_user ON auth_keys (user_id) WHERE user_id IS NOT NULL;

CREATE TABLE login_codes (
    phone_code_hash TEXT        PRIMARY KEY,
    phone           TEXT        NOT NULL,
    code            TEXT        NOT NULL,
    attempts        INT         NOT NULL DEFAULT 0,
    expires_at      TIMESTAMPTZ NOT NULL
);
