-- A permanent key has one temporary key at a time: binding a temporary key ends the others
-- bound to the same permanent key, found by this index. Binding and ending a temporary key
-- also set its bound_at, so every gateway instance drops what it cached of it.
CREATE INDEX auth_keys_perm_key ON auth_keys (perm_key_id) WHERE perm_key_id IS NOT NULL;
