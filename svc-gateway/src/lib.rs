//! svc-gateway: the client front door. It owns accounts, auth keys and login codes;
//! authenticates every call by its auth key; composes client responses from the domain
//! services; holds the devices' live update streams, registers their routes in Redis, and
//! takes pushes from svc-dispatch. It also owns what users know of each other (profiles,
//! usernames, privacy rules, contacts) and projects every user it returns through the
//! viewer's rights (`user_view.rs`). It also carries the transient signals (typing, presence)
//! between devices, gateway to gateway, and keeps each user's last seen.

mod account_api;
pub mod accounts;
mod acting;
pub mod auth;
mod cache;
mod catch_up;
mod contacts_api;
mod dialogs_api;
mod hub;
pub mod last_seen;
mod limits;
mod limits_admin;
mod media_api;
mod messages_api;
mod metrics;
pub mod mtproto;
mod outbound;
mod own_updates;
pub mod people;
mod presence;
pub mod privacy;
pub mod profile;
mod profile_push;
pub mod rules;
pub mod status;
mod transient;
mod typing;
mod updates_api;
pub mod user_view;
mod users_api;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use oxigram_kit::{
    Config, GrpcChannel,
    startup::{self, Starting},
};
use oxigram_outbox::Outbox;
use oxigram_proto::{
    admin::v1::limits_admin_server::LimitsAdminServer,
    api::v1::{
        account_server::AccountServer, auth_server::AuthServer, contacts_server::ContactsServer,
        dialogs_server::DialogsServer, media_server::MediaServer, messages_server::MessagesServer,
        updates_server::UpdatesServer, users_server::UsersServer,
    },
    dialogs::v1::dialogs_client::DialogsClient,
    gateway::v1::gateway_push_server::GatewayPushServer,
    media::v1::media_client::MediaClient,
    messages::v1::messages_client::MessagesClient,
    updates::v1::updates_client::UpdatesClient,
};
use oxigram_routes::{RedisHandle, Route, RouteLookup, Routes};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

pub use auth::AUTH_KEY_HEADER;

/// This service's Postgres schema.
pub const SCHEMA: &str = "gateway";

/// The service's migrations, applied into [`SCHEMA`] at start-up (and by store tests).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

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
    limits: limits::Limits,
    /// How many catch-ups this instance runs at once (reconnect storms).
    catch_ups: catch_up::CatchUpSlots,
    /// The operator's limit overrides and ban list, as this instance last loaded them.
    rules: Arc<rules::LiveRules>,
    /// The updates of users' own changes (profile, privacy, contacts) on their way to their logs.
    outbox: Outbox,
    to_updates: outbound::ToUpdates,
    typing: typing::Typing,
    transient: Arc<transient::Transient>,
    presence: Arc<presence::PresenceTracker>,
    /// Profile pushes scheduled, and when each user's was last pushed (coalescing).
    profile_pushes: profile_push::ProfilePushes,
    caches: cache::Caches,
    push_endpoint: String,
    /// Set when a stream's route could not be written: the route keeper registers every
    /// stream again as soon as Redis answers.
    routes_dirty: AtomicBool,
    /// Set while the route keeper cannot reach Redis: pushes may not find this instance's
    /// streams, so each stream pulls its user's log itself (`updates_api::run_stream`).
    routes_failing: AtomicBool,
    code_sender: Box<dyn auth::CodeSender>,
    shutdown: CancellationToken,
}

/// Runs svc-gateway until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = &config.services.gateway;
    let start = Starting::bind(&config, "gateway", me, SCHEMA, &MIGRATOR).await?;
    let outbound::Outbound {
        messages,
        updates,
        dialogs,
        media,
    } = outbound::Outbound::connect(&config)?;
    let hub = Arc::new(hub::Hub::default());
    let redis = RedisHandle::new(config.redis_url()?, (&config.redis).into(), "gateway")?;
    let outbox = Outbox::new(
        start.pool.clone(),
        SCHEMA,
        startup::relay_config(&config.outbox),
    );
    let to_updates = outbound::ToUpdates::new(updates.clone());
    let push_endpoint = config
        .gateway
        .advertise_push
        .clone()
        .unwrap_or_else(|| me.endpoint.clone());
    let route_lookup = RouteLookup::new(redis.clone(), &config.redis_key_prefix);
    let transient = Arc::new(transient::Transient {
        routes: route_lookup.clone(),
        hub: hub.clone(),
        peer_gateways: outbound::PeerGateways::new(config.rpc_timeout()),
        push_endpoint: push_endpoint.clone(),
    });
    let presence = presence::PresenceTracker::new(
        redis.clone(),
        &config.redis_key_prefix,
        route_lookup,
        start.pool.clone(),
        dialogs.clone(),
        messages.clone(),
        transient.clone(),
        &config.gateway,
    );
    let rules = Arc::new(rules::LiveRules::default());
    let gateway = Arc::new(Gateway {
        pool: start.pool.clone(),
        messages,
        updates,
        dialogs,
        media,
        hub: hub.clone(),
        routes: Routes::new(
            redis.clone(),
            &config.redis_key_prefix,
            Duration::from_secs(config.gateway.route_ttl_secs),
        ),
        limits: limits::Limits::new(redis, &config, rules.clone()),
        rules,
        catch_ups: catch_up::CatchUpSlots::new(
            config.streams.max_concurrent_catch_up,
            config.streams.catch_ups_per_second,
            config.streams.catch_up_line,
            Duration::from_millis(config.streams.retry_after_ms),
        ),
        outbox: outbox.clone(),
        to_updates: to_updates.clone(),
        typing: typing::Typing::default(),
        transient,
        presence,
        profile_pushes: profile_push::ProfilePushes::default(),
        push_endpoint,
        routes_dirty: AtomicBool::new(false),
        routes_failing: AtomicBool::new(false),
        code_sender: Box::new(auth::LogCodeSender),
        caches: cache::Caches::default(),
        shutdown: shutdown.clone(),
        config: config.clone(),
    });
    let relay = outbox.relay(to_updates).run(shutdown.clone());
    let background = {
        let shutdown = shutdown.clone();
        let gateway = gateway.clone();
        async move {
            let door = async {
                if let Err(error) = mtproto::serve(gateway.clone(), shutdown.clone()).await {
                    tracing::error!(error = format!("{error:#}"), "MTProto door closed");
                }
            };
            let reload_rules = rules::reload_periodically(
                &gateway.pool,
                &gateway.rules,
                Duration::from_millis(gateway.config.limits.reload_ms),
                &shutdown,
                |user| gateway.hub.disconnect_user(user),
            );
            tokio::join!(
                reload_rules,
                cache::forget_rebound_keys(&gateway.caches, &gateway.pool, &shutdown),
                refresh_routes(&gateway, &shutdown),
                keep_routes(&gateway, &shutdown),
                relay,
                door
            );
        }
    };
    let routes = tonic::service::Routes::new(AuthServer::new(auth::AuthApi(gateway.clone())))
        .add_service(UsersServer::new(users_api::UsersApi(gateway.clone())))
        .add_service(ContactsServer::new(contacts_api::ContactsApi(
            gateway.clone(),
        )))
        .add_service(MessagesServer::new(messages_api::MessagesApi(
            gateway.clone(),
        )))
        .add_service(UpdatesServer::new(updates_api::UpdatesApi(gateway.clone())))
        .add_service(DialogsServer::new(dialogs_api::DialogsApi(gateway.clone())))
        .add_service(MediaServer::new(media_api::MediaApi(gateway.clone())))
        .add_service(AccountServer::new(account_api::AccountApi(gateway.clone())))
        .add_service(GatewayPushServer::new(hub::PushApi(hub)));
    let routes = match oxigram_outbox::AdminToken::new(&config.admin.token) {
        Some(token) => routes.add_service(LimitsAdminServer::new(limits_admin::LimitsAdminApi {
            gateway: gateway.clone(),
            token,
        })),
        None => routes,
    };
    let deps = outbound::Outbound::dependencies(&config);
    start.serve(routes, deps, background, shutdown).await
}

/// How often the route keeper asks Redis whether this instance's routes are still there.
const ROUTE_CHECK_EVERY: Duration = Duration::from_millis(250);
/// Longest one of the route keeper's Redis calls may take: a hung Redis must not hold up the
/// checks that notice it is back.
const ROUTE_CALL_TIMEOUT: Duration = Duration::from_secs(1);

/// Has every open stream's route registered again well within its lifetime, so routes vanish on
/// their own when this instance dies, and ends the streams whose key was signed out or switched
/// account (possibly through another instance).
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
        gateway.routes_dirty.store(true, Ordering::Relaxed);
    }
}

/// Keeps this instance's routes in Redis: registers every open stream (one round trip, then
/// the instance's marker) at start, on each refresh, after a stream's own registration failed,
/// when Redis answers again after failing, and when the marker is gone, which is how a Redis
/// restart or FLUSHALL shows: an idle device's route is back within one check instead of at
/// the next refresh, a third of the route lifetime later. A check is one EXISTS; the hub's lock
/// is held only to copy the list of streams, never across a Redis call.
async fn keep_routes(gateway: &Gateway, shutdown: &CancellationToken) {
    // Nothing is registered yet: the first tick, at once, registers (dispatch keeps jobs
    // without routes until a gateway has written the table's live key).
    let mut must_register = true;
    let mut failing = false;
    let mut ticks = tokio::time::interval(ROUTE_CHECK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if gateway.routes_dirty.swap(false, Ordering::Relaxed) {
            must_register = true;
        }
        if !must_register {
            let check = tokio::time::timeout(
                ROUTE_CALL_TIMEOUT,
                gateway.routes.marker_present(&gateway.push_endpoint),
            )
            .await;
            match check {
                Ok(Ok(true)) => continue,
                Ok(Ok(false)) => {
                    tracing::warn!(
                        "Redis lost this gateway's routes (restart or flush); registering every stream again"
                    );
                }
                Ok(Err(err)) => {
                    note_failure(gateway, &mut failing, &err.to_string());
                    must_register = true;
                    continue;
                }
                Err(_) => {
                    note_failure(gateway, &mut failing, "timed out");
                    must_register = true;
                    continue;
                }
            }
        }
        let routes: Vec<(i64, Route)> = gateway
            .hub
            .attached()
            .into_iter()
            .map(|(user_id, auth_key_id, epoch)| {
                let route = Route {
                    auth_key_id,
                    epoch,
                    push_endpoint: gateway.push_endpoint.clone(),
                };
                (user_id, route)
            })
            .collect();
        let registered = tokio::time::timeout(
            ROUTE_CALL_TIMEOUT,
            gateway.routes.register_all(&gateway.push_endpoint, &routes),
        )
        .await;
        match registered {
            Ok(Ok(())) => {
                if failing {
                    tracing::info!(
                        streams = routes.len(),
                        "Redis answers again; every stream's route is registered"
                    );
                }
                failing = false;
                gateway.routes_failing.store(false, Ordering::Relaxed);
                must_register = false;
            }
            Ok(Err(err)) => note_failure(gateway, &mut failing, &err.to_string()),
            Err(_) => note_failure(gateway, &mut failing, "timed out"),
        }
    }
}

/// Logs the first of a run of failed route-keeper calls (the next ones say nothing new), and
/// has the streams pull their logs until the routes are registered again.
fn note_failure(gateway: &Gateway, failing: &mut bool, error: &str) {
    if !*failing {
        tracing::warn!(
            error,
            "cannot reach Redis; streams pull their updates until the routes are registered again"
        );
    }
    *failing = true;
    gateway.routes_failing.store(true, Ordering::Relaxed);
}
