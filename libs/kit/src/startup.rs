//! The start-up sequence every service shares: migrate its schema, wait for the services it
//! calls, then report SERVING. Until then its health says NOT_SERVING.

use oxigram_outbox::RelayConfig;
use sqlx::{PgPool, migrate::Migrator};
use tokio_util::sync::CancellationToken;

use crate::{config::OutboxConfig, server::Readiness};

/// Migrates `schema` with the service's migrations plus the outbox's, waits until every
/// `(name, endpoint)` in `dependencies` is SERVING, then flips `readiness` to SERVING.
pub fn become_ready(
    readiness: Readiness,
    pool: PgPool,
    schema: &'static str,
    migrations: &'static Migrator,
    dependencies: Vec<(&'static str, String)>,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, anyhow::Result<()>> {
    Box::pin(async move {
        oxigram_storage::migrate(&pool, schema, &[migrations, &oxigram_outbox::MIGRATOR]).await?;
        for (name, endpoint) in dependencies {
            if let Err(err) = crate::client::wait_serving(name, &endpoint, &shutdown).await {
                // Shut down before the dependency answered: not a start-up failure.
                if shutdown.is_cancelled() {
                    return Ok(());
                }
                return Err(err);
            }
        }
        readiness.serving().await;
        tracing::info!(schema, "service ready");
        Ok(())
    })
}

/// The relay settings of the shared configuration.
pub fn relay_config(c: &OutboxConfig) -> RelayConfig {
    RelayConfig::from_millis(
        c.batch_size,
        c.lease_ms,
        c.poll_ms,
        c.max_attempts,
        c.backoff_base_ms,
        c.backoff_max_ms,
        c.fast_path_grace_ms,
    )
}

/// Prunes the service's inbox hourly, keeping `inbox_retention_hours` of event ids.
pub fn prune_inbox(
    pool: PgPool,
    c: &OutboxConfig,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    let keep = std::time::Duration::from_secs(c.inbox_retention_hours * 3600);
    Box::pin(oxigram_outbox::prune_inbox_forever(
        pool,
        keep,
        std::time::Duration::from_secs(3600),
        shutdown,
    ))
}
