-- The operator's run-time rate-limit overrides and ban list. Every gateway instance keeps a
-- copy in memory and reloads it when `limit_rules_version.version` moves, which a statement
-- trigger does on any change to either table, so a reload check is one single-row read.
CREATE TABLE limit_overrides (
    rule TEXT PRIMARY KEY,
    limit_per_period INTEGER NOT NULL CHECK (limit_per_period >= 0),
    period_secs INTEGER NOT NULL CHECK (period_secs BETWEEN 1 AND 86400),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE bans (
    user_id BIGINT PRIMARY KEY,
    reason TEXT NOT NULL DEFAULT '',
    banned_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE limit_rules_version (
    singleton BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
    version BIGINT NOT NULL
);
INSERT INTO limit_rules_version (version) VALUES (1);

CREATE FUNCTION bump_limit_rules_version() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE limit_rules_version SET version = version + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER limit_overrides_changed AFTER INSERT OR UPDATE OR DELETE ON limit_overrides
    FOR EACH STATEMENT EXECUTE FUNCTION bump_limit_rules_version();
CREATE TRIGGER bans_changed AFTER INSERT OR UPDATE OR DELETE ON bans
    FOR EACH STATEMENT EXECUTE FUNCTION bump_limit_rules_version();
