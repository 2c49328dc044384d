//! svc-messages: private messages, owner-view message boxes and idempotency keys.
//!
//! A send is one local transaction: the idempotency key, a box id for each owner, the shared
//! body, the boxes, and one outbox event per owner for svc-updates; the sends that arrive
//! together share that transaction (group commit). Commit is PERSISTED. Right after commit the
//! events go to svc-updates directly (the fast path, so the response can carry the sender's
//! pts); the relay delivers whatever is left. svc-dialogs learns of them from the update log.
//! An edit is its own transaction (`edit`), and so are a delete (`delete`), a read of
//! contents (`read_contents`) and a reaction or a read of reactions (`reactions`); they hand
//! their events on the same way. A forward (`forward`) is a send of each source message's content,
//! with a forward header. Search reads word keys per owner, which an indexer
//! (`search_index`) writes from a queue each write of a body adds to.

pub mod delete;
pub mod edit;
pub mod entities;
pub mod file_reference;
pub mod forward;
mod group_commit;
mod outbound;
pub mod reactions;
pub mod read_contents;
mod rows;
pub mod search_index;
pub mod search_words;
pub mod send;
mod service;
pub mod store;

use std::sync::Arc;

use oxigram_kit::{
    Config,
    startup::{self, Starting},
};
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
    file_reference::configure(
        &config.media.file_reference_secret,
        config.media.file_reference_ttl_seconds,
    );
    let me = &config.services.messages;
    let start = Starting::bind(&config, "messages", me, SCHEMA, &MIGRATOR).await?;
    let outbox = Outbox::new(
        start.pool.clone(),
        SCHEMA,
        startup::relay_config(&config.outbox),
    );
    let to_updates = outbound::ToUpdates::new(oxigram_kit::channel(
        &config.services.updates.endpoint,
        config.rpc_timeout(),
    )?);
    let group = group_commit::GroupCommit::start(
        start.pool.clone(),
        outbox.clone(),
        to_updates.clone(),
        config.messages.send_workers,
    );
    let service = MessagesService::new(
        start.pool.clone(),
        group,
        outbox.clone(),
        to_updates.clone(),
    );
    let relay = outbox.relay(to_updates).run(shutdown.clone());
    let indexer = search_index::run(start.pool.clone(), shutdown.clone());
    let background = async move {
        tokio::join!(relay, indexer);
    };
    let deps = vec![("updates", config.services.updates.endpoint.clone())];
    let routes = tonic::service::Routes::new(MessagesServer::new(service));
    start.serve(routes, deps, background, shutdown).await
}
