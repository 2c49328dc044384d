//! svc-dialogs: each user's dialogs with their top message, read watermarks, unread counters
//! and delivery receipts, kept as a projection of her update log: svc-updates hands on every
//! logged event with its pts, and `ApplyEvents` applies each user's in pts order, once each.
//! A read is logged by svc-updates only while the reader's log is where the read counted it;
//! receipts and the sender's side of a read are events for svc-updates, written to this
//! service's outbox in the same transaction.

mod apply_settings;
pub mod filters;
pub mod outbound;
pub mod projection;
mod read;
mod service;
pub mod settings;
pub mod store;

use std::{sync::Arc, time::Duration};

use oxigram_kit::{
    Config,
    startup::{self, Starting},
};
use oxigram_outbox::{FastPath, Outbox};
use oxigram_proto::dialogs::v1::dialogs_server::DialogsServer;
use tokio_util::sync::CancellationToken;

pub use service::DialogsService;

/// This service's Postgres schema.
pub const SCHEMA: &str = "dialogs";

/// The service's migrations, applied into [`SCHEMA`] at start-up (and by store tests).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs svc-dialogs until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = &config.services.dialogs;
    let start = Starting::bind(&config, "dialogs", me, SCHEMA, &MIGRATOR).await?;
    let pool = start.pool.clone();
    let outbox = Outbox::new(pool.clone(), SCHEMA, startup::relay_config(&config.outbox));
    let to_updates = outbound::ToUpdates::new(oxigram_kit::channel(
        &config.services.updates.endpoint,
        config.rpc_timeout(),
    )?);
    let to_updates = Arc::new(to_updates);
    let derived = FastPath::start(outbox.clone(), to_updates.clone(), Duration::ZERO);
    let service = DialogsService::new(pool.clone(), outbox.clone(), (*to_updates).clone(), derived);
    let relay = outbox.relay(to_updates).run(shutdown.clone());
    let prune = startup::prune_inbox(pool, &config.outbox, shutdown.clone());
    let deps = vec![("updates", config.services.updates.endpoint.clone())];
    let routes = tonic::service::Routes::new(DialogsServer::new(service));
    let background = async move {
        tokio::join!(relay, prune);
    };
    start.serve(routes, deps, background, shutdown).await
}
