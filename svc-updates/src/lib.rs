//! svc-updates: per-user pts and the durable update log.
//!
//! `Append` is the idempotent receiver of user events: it assigns pts per user inside one
//! transaction (the user's state row is locked, so pts is gap-free and never goes back), logs
//! the events, and writes push jobs for svc-dispatch into its own outbox in the same
//! transaction. `GetDifference` serves the log back in pts order, in bounded slices.

mod batcher;
mod log;
mod service;

use std::sync::Arc;

use oxigram_kit::{Config, GrpcServer, startup};
use oxigram_outbox::{FastPath, Outbox};
use oxigram_proto::internal::v1::updates_server::UpdatesServer;
use tokio_util::sync::CancellationToken;

pub use service::UpdatesService;

/// This service's Postgres schema.
pub const SCHEMA: &str = "updates";
/// Outbox destination of push jobs.
pub const TO_DISPATCH: &str = "dispatch";

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs svc-updates until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = &config.services.updates;
    let server = GrpcServer::bind("updates", me).await?;
    let pool =
        oxigram_storage::connect_lazy(&config.database_url_for(me)?, SCHEMA, config.db_pool_size)?;
    let outbox = Outbox::new(pool.clone(), SCHEMA, startup::relay_config(&config.outbox));
    let dispatch = oxigram_kit::channel(&config.services.dispatch.endpoint, config.rpc_timeout())?;
    let to_dispatch = Arc::new(service::ToDispatch::new(dispatch));
    let service = UpdatesService::new(
        pool.clone(),
        outbox.clone(),
        FastPath::start(
            outbox.clone(),
            to_dispatch.clone(),
            std::time::Duration::from_millis(config.updates.dispatch_linger_ms),
        ),
        config.updates.retain_per_user,
        config.updates.append_workers,
    );
    let relay = outbox.relay(to_dispatch);
    let readiness = server.readiness();
    let background = {
        let shutdown = shutdown.clone();
        let dispatch_endpoint = config.services.dispatch.endpoint.clone();
        async move {
            let deps = vec![("dispatch", dispatch_endpoint)];
            startup::become_ready(readiness, pool, SCHEMA, &MIGRATOR, deps, shutdown.clone())
                .await?;
            relay.run(shutdown).await;
            anyhow::Ok(())
        }
    };
    let routes = tonic::service::Routes::new(UpdatesServer::new(service));
    tokio::try_join!(server.serve(routes, shutdown.clone()), background)?;
    Ok(())
}
