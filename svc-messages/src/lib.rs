//! svc-messages: private messages, owner-view message boxes and idempotency keys.
//!
//! A send is one local transaction: the idempotency key, a box id for each owner, the shared
//! body, the boxes, and one outbox event per owner for svc-updates; the sends that arrive
//! together share that transaction (group commit). Commit is PERSISTED. Right after commit the
//! events go to svc-updates directly (the fast path, so the response can carry the sender's
//! pts); the relay delivers whatever is left. svc-dialogs learns of them from the update log.

mod group_commit;
mod outbound;
mod rows;
pub mod send;
mod service;
pub mod store;

use std::sync::Arc;

use oxigram_kit::{Config, GrpcServer, startup};
use oxigram_outbox::Outbox;
use oxigram_proto::messages::v1::messages_server::MessagesServer;
use tokio_util::sync::CancellationToken;

pub use service::MessagesService;

/// This service's Postgres schema.
pub const SCHEMA: &str = "messages";
/// Outbox destination.
pub use outbound::TO_UPDATES;

/// The service's migrations, applied into [`SCHEMA`] at start-up (and by store tests).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs svc-messages until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = &config.services.messages;
    let server = GrpcServer::bind("messages", me).await?;
    let pool =
        oxigram_storage::connect_lazy(&config.database_url_for(me)?, SCHEMA, config.db_pool_size)?;
    let outbox = Outbox::new(pool.clone(), SCHEMA, startup::relay_config(&config.outbox));
    let to_updates = outbound::ToUpdates::new(oxigram_kit::channel(
        &config.services.updates.endpoint,
        config.rpc_timeout(),
    )?);
    let group = group_commit::GroupCommit::start(
        pool.clone(),
        outbox.clone(),
        to_updates.clone(),
        config.messages.send_workers,
    );
    let service = MessagesService::new(pool.clone(), group);
    let updates_relay = outbox.relay(to_updates);
    let readiness = server.readiness();
    let background = {
        let shutdown = shutdown.clone();
        let deps = vec![("updates", config.services.updates.endpoint.clone())];
        async move {
            startup::become_ready(readiness, pool, SCHEMA, &MIGRATOR, deps, shutdown.clone())
                .await?;
            updates_relay.run(shutdown).await;
            anyhow::Ok(())
        }
    };
    let routes = tonic::service::Routes::new(MessagesServer::new(service));
    tokio::try_join!(server.serve(routes, shutdown.clone()), background)?;
    Ok(())
}
