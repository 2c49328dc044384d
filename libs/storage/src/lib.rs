//! Postgres for one service: a pool whose connections see only the service's own schema
//! (`search_path`), migrations applied into that schema, and batches bound as arrays
//! ([`unnest`]).

pub mod health;
pub mod unnest;

use std::{
    str::FromStr,
    sync::{Arc, Weak, atomic::AtomicU64},
    time::Duration,
};

use sqlx::{
    Connection as _, PgPool,
    migrate::Migrator,
    postgres::{PgConnectOptions, PgListener, PgPoolOptions},
};

/// A pooled connection idle longer than this is pinged before use; one used more recently is
/// handed out as it is, unless it has been idle since a connection loss was seen (see
/// [`health`]). Pinging on every acquire (sqlx's default) costs a round trip per transaction,
/// which under load is a scheduling wake-up of the backend on every send.
pub const PING_WHEN_IDLE_FOR: Duration = Duration::from_secs(10);

/// How long the watch connection waits before it connects again after losing the server.
const WATCH_RECONNECT_AFTER: Duration = Duration::from_millis(200);
/// How often the watch looks whether its pool still exists.
const WATCH_POOL_CHECK: Duration = Duration::from_secs(5);

/// A lazily connecting pool bound to `schema`: unqualified names resolve there and only there.
///
/// Beside the pool runs one more connection of the same options, the watch, which only waits
/// for the server to close it: the moment Postgres restarts, it records the loss, so the
/// pool's idle connections are tested before use instead of failing requests (see
/// [`health`]). It ends with the pool. Must be called inside a Tokio runtime for the watch to
/// run.
pub fn connect_lazy(url: &str, schema: &str, pool_size: u32) -> anyhow::Result<PgPool> {
    anyhow::ensure!(is_identifier(schema), "invalid schema name {schema:?}");
    let options = PgConnectOptions::from_str(url)?
        .options([("search_path", schema)])
        .application_name(&format!("oxigram-{schema}"));
    // When this pool's watch last lost the server; held by the pool's acquire hook, so it
    // lives exactly as long as the pool.
    let watched = Arc::new(AtomicU64::new(0));
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(watch(options.clone(), Arc::downgrade(&watched)));
    }
    Ok(PgPoolOptions::new()
        .max_connections(pool_size)
        .acquire_timeout(Duration::from_secs(5))
        .test_before_acquire(false)
        .before_acquire(move |conn, meta| {
            let suspect = meta.idle_for >= PING_WHEN_IDLE_FOR
                || health::idle_since_loss(meta.idle_for, &watched);
            Box::pin(async move {
                if suspect {
                    // A dead connection fails here: the pool drops it and opens another.
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
        .connect_lazy_with(options))
}

/// The watch connection of one pool: waits for the server to close it (restart, crash,
/// terminated backend), records the loss in `watched`, and connects again. Nothing is sent on
/// it. Ends once the pool is gone.
async fn watch(options: PgConnectOptions, watched: Weak<AtomicU64>) {
    let server = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy_with(options);
    let mut listener: Option<PgListener> = None;
    while watched.strong_count() > 0 {
        let connected = match listener.as_mut() {
            Some(connected) => connected,
            None => match PgListener::connect_with(&server).await {
                Ok(mut connected) => {
                    // It reconnects here, after a pause, not inside `try_recv`.
                    connected.eager_reconnect(false);
                    listener.insert(connected)
                }
                Err(err) => {
                    tracing::debug!(error = %err, "the pool's watch cannot connect yet");
                    tokio::time::sleep(WATCH_RECONNECT_AFTER).await;
                    continue;
                }
            },
        };
        tokio::select! {
            received = connected.try_recv() => {
                // Nothing is listened to, so anything that ends the wait is the connection's end.
                if let Err(err) = &received {
                    tracing::debug!(error = %err, "the pool's watch connection failed");
                }
                if !matches!(received, Ok(Some(_))) {
                    if let Some(watched) = watched.upgrade() {
                        health::record(&watched);
                    }
                    tracing::info!("Postgres closed the pool's watch connection: idle connections are tested before use");
                    listener = None;
                    tokio::time::sleep(WATCH_RECONNECT_AFTER).await;
                }
            }
            _ = tokio::time::sleep(WATCH_POOL_CHECK) => {}
        }
    }
    drop(listener);
    server.close().await;
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
