//! svc-gateway: the client front door. It owns accounts, auth keys and login codes;
//! authenticates every call by its auth key; composes client responses from the domain
//! services; holds the devices' live update streams, registers their routes in Redis, and
//! takes pushes from svc-dispatch.

mod accounts;
pub mod auth;
mod cache;
mod dialogs_api;
mod hub;
mod media_api;
mod messages_api;
mod rate_limit;
mod updates_api;
mod users_api;

use std::{sync::Arc, time::Duration};

use oxigram_kit::{Config, GrpcChannel, GrpcServer, startup};
use oxigram_proto::{
    api::v1::{
        auth_server::AuthServer, dialogs_server::DialogsServer, media_server::MediaServer,
        messages_server::MessagesServer, updates_server::UpdatesServer, users_server::UsersServer,
    },
    internal::v1::{
        dialogs_client::DialogsClient, gateway_push_server::GatewayPushServer,
        media_client::MediaClient, messages_client::MessagesClient, updates_client::UpdatesClient,
    },
};
use oxigram_routes::{RedisHandle, Route, Routes};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

pub use auth::AUTH_KEY_HEADER;

/// This service's Postgres schema.
pub const SCHEMA: &str = "gateway";

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// What every client-facing service of the gateway shares.
pub struct Gateway {
    pool: PgPool,
    config: Arc<Config>,
    messages: MessagesClient<GrpcChannel>,
    updates: UpdatesClient<GrpcChannel>,
    dialogs: DialogsClient<GrpcChannel>,
    media: MediaClient<GrpcChannel>,
    hub: Arc<hub::Hub>,
    routes: Routes,
    send_limiter: rate_limit::SendLimiter,
    caches: cache::Caches,
    push_endpoint: String,
    code_sender: Box<dyn auth::CodeSender>,
    shutdown: CancellationToken,
}

/// Runs svc-gateway until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = &config.services.gateway;
    let server = GrpcServer::bind("gateway", me).await?;
    let pool =
        oxigram_storage::connect_lazy(&config.database_url_for(me)?, SCHEMA, config.db_pool_size)?;
    let timeout = config.rpc_timeout();
    let s = &config.services;
    let hub = Arc::new(hub::Hub::default());
    let redis = RedisHandle::new(config.redis_url()?)?;
    let gateway = Arc::new(Gateway {
        pool: pool.clone(),
        messages: MessagesClient::new(oxigram_kit::channel(&s.messages.endpoint, timeout)?),
        updates: UpdatesClient::new(oxigram_kit::channel(&s.updates.endpoint, timeout)?),
        dialogs: DialogsClient::new(oxigram_kit::channel(&s.dialogs.endpoint, timeout)?),
        media: MediaClient::new(oxigram_kit::channel(&s.media.endpoint, timeout)?),
        hub: hub.clone(),
        routes: Routes::new(
            redis.clone(),
            &config.redis_key_prefix,
            Duration::from_secs(config.gateway.route_ttl_secs),
        ),
        send_limiter: rate_limit::SendLimiter::new(
            redis,
            &config.redis_key_prefix,
            config.gateway.sends_per_minute,
        ),
        push_endpoint: config
            .gateway
            .advertise_push
            .clone()
            .unwrap_or_else(|| me.endpoint.clone()),
        code_sender: Box::new(auth::LogCodeSender),
        caches: cache::Caches::default(),
        shutdown: shutdown.clone(),
        config: config.clone(),
    });
    let readiness = server.readiness();
    let background = {
        let shutdown = shutdown.clone();
        let gateway = gateway.clone();
        let deps = vec![
            ("messages", s.messages.endpoint.clone()),
            ("updates", s.updates.endpoint.clone()),
            ("dialogs", s.dialogs.endpoint.clone()),
            ("media", s.media.endpoint.clone()),
        ];
        async move {
            startup::become_ready(readiness, pool, SCHEMA, &MIGRATOR, deps, shutdown.clone())
                .await?;
            refresh_routes(&gateway, &shutdown).await;
            anyhow::Ok(())
        }
    };
    let routes = tonic::service::Routes::new(AuthServer::new(auth::AuthApi(gateway.clone())))
        .add_service(UsersServer::new(users_api::UsersApi(gateway.clone())))
        .add_service(MessagesServer::new(messages_api::MessagesApi(
            gateway.clone(),
        )))
        .add_service(UpdatesServer::new(updates_api::UpdatesApi(gateway.clone())))
        .add_service(DialogsServer::new(dialogs_api::DialogsApi(gateway.clone())))
        .add_service(MediaServer::new(media_api::MediaApi(gateway.clone())))
        .add_service(GatewayPushServer::new(hub::PushApi(hub)));
    tokio::try_join!(server.serve(routes, shutdown.clone()), background)?;
    Ok(())
}

/// Re-registers every open stream's route well within its lifetime, so routes survive a
/// Redis flush or restart and vanish on their own when this instance dies. Streams whose key
/// was signed out or switched account (possibly through another instance) end here.
async fn refresh_routes(gateway: &Gateway, shutdown: &CancellationToken) {
    let period = Duration::from_secs((gateway.config.gateway.route_ttl_secs / 3).max(1));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        let attached = gateway.hub.attached();
        let keys: Vec<i64> = attached.iter().map(|(_, key, _)| *key).collect();
        match accounts::bindings(&gateway.pool, &keys).await {
            Ok(bound) => {
                for (user_id, auth_key_id, _) in &attached {
                    let still = bound
                        .iter()
                        .any(|(k, u)| k == auth_key_id && *u == Some(*user_id));
                    if !still {
                        gateway.hub.disconnect_device(*auth_key_id);
                    }
                }
            }
            Err(err) => tracing::warn!(error = %err, "cannot re-check the streams' auth keys"),
        }
        for (user_id, auth_key_id, epoch) in gateway.hub.attached() {
            let route = Route {
                auth_key_id,
                epoch,
                push_endpoint: gateway.push_endpoint.clone(),
            };
            if let Err(err) = gateway.routes.register(user_id, &route).await {
                tracing::warn!(error = %err, "route refresh failed; pushes wait for Redis");
                break;
            }
        }
    }
}
