//! svc-dialogs: each user's dialogs with their top message, read watermarks and unread
//! counters. It learns of new messages from the same events as the update log, through its
//! idempotent `ApplyEvents` receiver.

mod service;
mod store;

use std::sync::Arc;

use oxigram_kit::{Config, GrpcServer, startup};
use oxigram_proto::internal::v1::dialogs_server::DialogsServer;
use tokio_util::sync::CancellationToken;

pub use service::DialogsService;

/// This service's Postgres schema.
pub const SCHEMA: &str = "dialogs";

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs svc-dialogs until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = &config.services.dialogs;
    let server = GrpcServer::bind("dialogs", me.listen).await?;
    let pool =
        oxigram_storage::connect_lazy(&config.database_url_for(me)?, SCHEMA, config.db_pool_size)?;
    let service = DialogsService::new(pool.clone());
    let readiness = server.readiness();
    let background = {
        let shutdown = shutdown.clone();
        startup::become_ready(readiness, pool, SCHEMA, &MIGRATOR, vec![], shutdown)
    };
    let routes = tonic::service::Routes::new(DialogsServer::new(service));
    tokio::try_join!(server.serve(routes, shutdown.clone()), background)?;
    Ok(())
}
