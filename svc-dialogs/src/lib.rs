//! svc-dialogs: each user's dialogs with their top message, read watermarks, unread counters
//! and delivery receipts. It learns of new messages from the same events as the update log,
//! through its idempotent `ApplyEvents` receiver; reads and receipts it makes are events for
//! svc-updates, written to its own outbox in the same transaction.

mod service;
mod store;

use std::sync::Arc;

use oxigram_kit::{Config, GrpcServer, startup, to_updates::ToUpdates};
use oxigram_outbox::Outbox;
use oxigram_proto::internal::v1::dialogs_server::DialogsServer;
use tokio_util::sync::CancellationToken;

pub use service::DialogsService;

/// This service's Postgres schema.
pub const SCHEMA: &str = "dialogs";

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs svc-dialogs until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = &config.services.dialogs;
    let server = GrpcServer::bind("dialogs", me).await?;
    let pool =
        oxigram_storage::connect_lazy(&config.database_url_for(me)?, SCHEMA, config.db_pool_size)?;
    let outbox = Outbox::new(pool.clone(), SCHEMA, startup::relay_config(&config.outbox));
    let to_updates = ToUpdates::new(oxigram_kit::channel(
        &config.services.updates.endpoint,
        config.rpc_timeout(),
    )?);
    let service = DialogsService::new(pool.clone(), outbox.clone(), to_updates.clone());
    let relay = outbox.relay(to_updates);
    let readiness = server.readiness();
    let background = {
        let shutdown = shutdown.clone();
        let outbox_config = config.outbox.clone();
        let deps = vec![("updates", config.services.updates.endpoint.clone())];
        async move {
            let prune = startup::prune_inbox(pool.clone(), &outbox_config, shutdown.clone());
            startup::become_ready(readiness, pool, SCHEMA, &MIGRATOR, deps, shutdown.clone())
                .await?;
            tokio::join!(relay.run(shutdown), prune);
            anyhow::Ok(())
        }
    };
    let routes = tonic::service::Routes::new(DialogsServer::new(service));
    tokio::try_join!(server.serve(routes, shutdown.clone()), background)?;
    Ok(())
}
