-- Every sign-in and sign-out of a key sets its bound_at, so the keys whose binding changed
-- since a moment are a range of this index: each gateway instance asks for them every second
-- and drops those keys from its cache, which lets it keep the others for long.
CREATE INDEX auth_keys_bound_at ON auth_keys (bound_at) WHERE bound_at IS NOT NULL;
