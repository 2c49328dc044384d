//! svc-updates: per-user pts and the durable update log.
//!
//! `Append` is the idempotent receiver of user events: it assigns pts per user inside one
//! transaction (the user's state row is locked, so pts is gap-free and never goes back), logs
//! the events, and writes push jobs for svc-dispatch and the logged events for svc-dialogs into
//! its own outbox in the same transaction. `AppendIf` appends one event only while the user's
//! log is still at a given pts. `GetDifference` serves the log back in pts order, in bounded
//! slices.

mod batcher;
pub mod log;
mod outbound;
mod service;

use std::sync::Arc;

use oxigram_kit::{
    Config,
    startup::{self, Starting},
};
use oxigram_outbox::Outbox;
use oxigram_proto::updates::v1::updates_server::UpdatesServer;
use tokio_util::sync::CancellationToken;

pub use outbound::{TO_DIALOGS, TO_DISPATCH};
pub use service::UpdatesService;

/// This service's Postgres schema.
pub const SCHEMA: &str = "updates";

/// The service's migrations, applied into [`SCHEMA`] at start-up (and by store tests).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs svc-updates until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = &config.services.updates;
    let start = Starting::bind(&config, "updates", me, SCHEMA, &MIGRATOR).await?;
    let outbox = Outbox::new(
        start.pool.clone(),
        SCHEMA,
        startup::relay_config(&config.outbox),
    );
    let dispatch = oxigram_kit::channel(&config.services.dispatch.endpoint, config.rpc_timeout())?;
    let to_dispatch = Arc::new(outbound::ToDispatch::new(dispatch));
    let dialogs = oxigram_kit::channel(&config.services.dialogs.endpoint, config.rpc_timeout())?;
    let to_dialogs = Arc::new(outbound::ToDialogs::new(dialogs));
    let millis = std::time::Duration::from_millis;
    let hand_offs = outbound::HandOffs::start(
        &outbox,
        (
            to_dispatch.clone(),
            millis(config.updates.dispatch_linger_ms),
        ),
        (to_dialogs.clone(), millis(config.updates.dialogs_linger_ms)),
    );
    let service = UpdatesService::new(
        start.pool.clone(),
        outbox.clone(),
        hand_offs,
        config.updates.retain_per_user,
        config.updates.append_workers,
    );
    let relays = (
        outbox.relay(to_dispatch).run(shutdown.clone()),
        outbox.relay(to_dialogs).run(shutdown.clone()),
    );
    let background = async move {
        tokio::join!(relays.0, relays.1);
    };
    // Not svc-dialogs, which waits for this service: its relay retries until it serves.
    let deps = vec![("dispatch", config.services.dispatch.endpoint.clone())];
    let routes = tonic::service::Routes::new(UpdatesServer::new(service));
    start.serve(routes, deps, background, shutdown).await
}
