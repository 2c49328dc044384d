//! svc-dispatch: the push outbox. `Enqueue` stores push jobs durably (deduplicated by event
//! id) and pushes them right after commit; the relay claims whatever that missed, in batches.
//! A push resolves the users' online devices from the route table, groups the jobs by gateway
//! instance and pushes each group in one call; failures retry with backoff. A device that is offline simply gets nothing: getDifference is its catch-up path.
//! "No route" is taken for offline only while the route table is whole: after Redis lost it,
//! jobs wait for the relay's retry until the gateways have registered their streams again.

mod outbound;
mod service;

use std::sync::Arc;

use oxigram_kit::{
    Config,
    startup::{self, Starting},
};
use oxigram_outbox::{FastPath, Outbox};
use oxigram_proto::dispatch::v1::dispatch_server::DispatchServer;
use oxigram_routes::{RedisHandle, RouteLookup};
use tokio_util::sync::CancellationToken;

pub use outbound::TO_GATEWAYS;
pub use service::DispatchService;

/// This service's Postgres schema.
pub const SCHEMA: &str = "dispatch";

/// The service's migrations, applied into [`SCHEMA`] at start-up (and by store tests).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs svc-dispatch until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = &config.services.dispatch;
    let start = Starting::bind(&config, "dispatch", me, SCHEMA, &MIGRATOR).await?;
    let pool = start.pool.clone();
    let outbox = Outbox::new(pool.clone(), SCHEMA, startup::relay_config(&config.outbox));
    let routes = RouteLookup::new(
        RedisHandle::new(config.redis_url()?, (&config.redis).into(), "dispatch")?,
        &config.redis_key_prefix,
    );
    let to_gateways = Arc::new(outbound::ToGateways::new(routes, config.rpc_timeout()));
    let fast_path = FastPath::start(
        outbox.clone(),
        to_gateways.clone(),
        std::time::Duration::ZERO,
    );
    let service = DispatchService::new(pool.clone(), outbox.clone(), fast_path);
    let relay = outbox.relay(to_gateways).run(shutdown.clone());
    let prune = startup::prune_inbox(pool, &config.outbox, shutdown.clone());
    let background = async move {
        tokio::join!(relay, prune);
    };
    let grpc_routes = tonic::service::Routes::new(DispatchServer::new(service));
    start.serve(grpc_routes, vec![], background, shutdown).await
}
