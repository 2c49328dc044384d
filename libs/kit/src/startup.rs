//! The start-up sequence every service shares: migrate its schema, wait for the services it
//! calls, then report SERVING. Until then its health says NOT_SERVING.

use std::future::Future;

use oxigram_outbox::RelayConfig;
use sqlx::{PgPool, migrate::Migrator};
use tokio_util::sync::CancellationToken;

use crate::{
    Config, ServiceAddr,
    config::OutboxConfig,
    server::{GrpcServer, Readiness},
};

/// A service between binding its port and serving: its listener, and its pool bound to its
/// own schema (connected lazily, so a service starts while Postgres is still coming up).
pub struct Starting {
    server: GrpcServer,
    /// The service's pool, on its schema.
    pub pool: PgPool,
    schema: &'static str,
    migrations: &'static Migrator,
    /// `[admin] token`: when set, the service also serves the admin API of its outbox.
    admin_token: String,
}

impl Starting {
    /// Binds `me`'s port and connects the pool to `schema`, whose migrations are `migrations`.
    pub async fn bind(
        config: &Config,
        name: &'static str,
        me: &ServiceAddr,
        schema: &'static str,
        migrations: &'static Migrator,
    ) -> anyhow::Result<Self> {
        let server = GrpcServer::bind(name, me)
            .await?
            .with_drain(config.balancing.shutdown_drain())
            .with_admission(config.admission.max_in_flight);
        let pool = oxigram_storage::connect_lazy(
            &config.database_url_for(me)?,
            schema,
            config.db_pool_size,
        )?;
        Ok(Self {
            server,
            pool,
            schema,
            migrations,
            admin_token: config.admin.token.clone(),
        })
    }

    /// Serves `routes` until `shutdown`. Meanwhile it becomes ready ([`become_ready`], with
    /// `dependencies`), and only then runs `after_ready` (relays and other background loops,
    /// which must end on `shutdown`): nothing is handed on before the schema is migrated.
    /// Every service's schema holds an outbox, so with `[admin] token` set each one serves
    /// its admin API beside `routes`.
    pub async fn serve(
        self,
        mut routes: tonic::service::Routes,
        dependencies: Vec<(&'static str, String)>,
        after_ready: impl Future<Output = ()> + Send + 'static,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        if let Some(admin) =
            oxigram_outbox::AdminService::server(self.pool.clone(), &self.admin_token)
        {
            routes = routes.add_service(admin);
        }
        let ready = become_ready(
            self.server.readiness(),
            self.pool,
            self.schema,
            self.migrations,
            dependencies,
            shutdown.clone(),
        );
        let background = async move {
            ready.await?;
            after_ready.await;
            anyhow::Ok(())
        };
        tokio::try_join!(self.server.serve(routes, shutdown), background)?;
        Ok(())
    }
}

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
        migrate(&pool, schema, migrations).await?;
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

/// Migrates a service's schema with its own migrations and the outbox's: the first step of
/// every start, and all that `oxigram migrate` does.
pub async fn migrate(pool: &PgPool, schema: &str, migrations: &Migrator) -> anyhow::Result<()> {
    oxigram_storage::migrate(pool, schema, &[migrations, &oxigram_outbox::MIGRATOR]).await
}

/// Connects to a service's database and migrates its schema, without serving anything.
pub async fn migrate_only(
    config: &Config,
    me: &ServiceAddr,
    schema: &str,
    migrations: &Migrator,
) -> anyhow::Result<()> {
    let pool =
        oxigram_storage::connect_lazy(&config.database_url_for(me)?, schema, config.db_pool_size)?;
    migrate(&pool, schema, migrations).await?;
    pool.close().await;
    Ok(())
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
