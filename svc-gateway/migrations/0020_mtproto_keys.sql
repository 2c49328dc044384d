-- MTProto auth keys are rows of auth_keys: the id is the key's MTProto id, secret_hash the
-- SHA-256 of the 256-byte key (so the gRPC door's authentication, logout and authorizations
-- treat them like any key), and the key itself is kept to decrypt the client's messages.
ALTER TABLE auth_keys ADD COLUMN mtproto_key BYTEA;
-- A temporary key bound with auth.bindTempAuthKey acts for its permanent key until it expires.
ALTER TABLE auth_keys ADD COLUMN perm_key_id BIGINT REFERENCES auth_keys (id) ON DELETE CASCADE;
ALTER TABLE auth_keys ADD COLUMN expires_at TIMESTAMPTZ;
