//! Postgres for one service: a pool whose connections see only the service's own schema
//! (`search_path`), and migrations applied into that schema.

use std::str::FromStr;

use sqlx::{
    Connection as _, PgPool,
    migrate::Migrator,
    postgres::{PgConnectOptions, PgPoolOptions},
};

/// A pooled connection idle longer than this is pinged before use; one used more recently is
/// handed out as it is. Pinging on every acquire (sqlx's default) costs a round trip per
/// transaction, which under load is a scheduling wake-up of the backend on every send; a
/// connection that broke in between fails its next statement, and the caller's retry (or the
/// outbox relay) runs on a fresh one.
const PING_WHEN_IDLE_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// A lazily connecting pool bound to `schema`: unqualified names resolve there and only there.
pub fn connect_lazy(url: &str, schema: &str, pool_size: u32) -> anyhow::Result<PgPool> {
    anyhow::ensure!(is_identifier(schema), "invalid schema name {schema:?}");
    let options = PgConnectOptions::from_str(url)?
        .options([("search_path", schema)])
        .application_name(&format!("oxigram-{schema}"));
    Ok(PgPoolOptions::new()
        .max_connections(pool_size)
        .acquire_timeout(std::time::Duration::from_secs(5))
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_WHEN_IDLE_FOR {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        .connect_lazy_with(options))
}

/// The policy every service schema gets after its own migrations and the outbox's (autovacuum
/// thresholds of its hot tables).
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Creates the schema when missing and applies `migrators` (the service's own first, then
/// those of shared libraries such as the outbox), then this crate's [`MIGRATOR`], into it, as
/// one ordered set.
///
/// Boxed so that callers' futures stay provably `Send` (sqlx's migrator is generic over lifetimes).
pub fn migrate<'a>(
    pool: &'a PgPool,
    schema: &'a str,
    migrators: &'a [&'a Migrator],
) -> futures::future::BoxFuture<'a, anyhow::Result<()>> {
    Box::pin(migrate_inner(pool, schema, migrators))
}

async fn migrate_inner(pool: &PgPool, schema: &str, migrators: &[&Migrator]) -> anyhow::Result<()> {
    anyhow::ensure!(is_identifier(schema), "invalid schema name {schema:?}");
    let migrations = migrators
        .iter()
        .chain([&&MIGRATOR])
        .flat_map(|m| m.iter().cloned())
        .collect::<Vec<_>>();
    let combined = Migrator::with_migrations(migrations);
    let mut conn = pool.acquire().await?;
    // Services may start together against one database: serialise schema creation too.
    sqlx::query("SELECT pg_advisory_lock(hashtext('oxigram.schema'))")
        .execute(&mut *conn)
        .await?;
    let created = sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE SCHEMA IF NOT EXISTS \"{schema}\""
    )))
    .execute(&mut *conn)
    .await;
    let migrated = match created {
        // Runs on another pooled connection while this one holds the lock.
        Ok(_) => combined.run(pool).await.map_err(anyhow::Error::from),
        Err(e) => Err(e.into()),
    };
    sqlx::query("SELECT pg_advisory_unlock(hashtext('oxigram.schema'))")
        .execute(&mut *conn)
        .await?;
    migrated?;
    tracing::info!(schema, "migrations applied");
    Ok(())
}

fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
