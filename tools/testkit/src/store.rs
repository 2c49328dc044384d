//! One service's schema, migrated into a fresh database of the test Postgres, for testing
//! that service's store functions without starting any service.

use sqlx::{PgPool, migrate::Migrator};

use crate::{Infra, fresh_database, infra};

/// Connections of a fixture's pool: enough for a test's concurrent transactions.
const POOL_SIZE: u32 = 8;

/// A migrated schema in a database of its own.
pub struct Migrated {
    /// Bound to the schema exactly as the service's own pool is
    /// ([`oxigram_storage::connect_lazy`]): unqualified names resolve there.
    pub pool: PgPool,
    /// The database's URL, for a second connection (a listener, a competing transaction).
    pub url: String,
    pub schema: &'static str,
    /// Dropped after the pool: keeps containers alive for the test.
    _infra: Infra,
}

/// A fresh database with `schema` migrated as a service migrates it at start-up
/// (`oxigram_kit::startup::become_ready`): `migrators` in order (the service's own, then the
/// outbox's when it has one), then the storage policy. Example:
/// `migrated(svc_x::SCHEMA, &[&svc_x::MIGRATOR, &oxigram_outbox::MIGRATOR])`.
pub fn migrated(
    schema: &'static str,
    migrators: &[&'static Migrator],
) -> impl Future<Output = anyhow::Result<Migrated>> + Send + 'static {
    // Owned, so that the fixture does not borrow the caller's list.
    let migrators = migrators.to_vec();
    async move {
        let infra = infra().await?;
        let url = fresh_database(&infra).await?;
        let pool = oxigram_storage::connect_lazy(&url, schema, POOL_SIZE)?;
        oxigram_storage::migrate(&pool, schema, &migrators).await?;
        Ok(Migrated {
            pool,
            url,
            schema,
            _infra: infra,
        })
    }
}
