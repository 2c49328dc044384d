//! The MTProto front door: stock Telegram clients connect over TCP (`[mtproto] listen`), create
//! auth keys with the server's RSA key (`[mtproto] rsa_key_file`), and call the API. An MTProto
//! auth key is a row of the gateway's auth_keys (see `keys`), so signing in, logging out and
//! the authorizations list are the gRPC door's own; every call is answered by the same
//! handlers as the gRPC API (`api`), translated to and from Telegram's TL types (`convert`).
//! Clients are told to reconnect to the address `advertised` names.

mod advertised;
mod api;
mod convert;
mod entities;
mod feed;
pub mod keys;
mod media;
mod messages;
mod metrics;
mod updates;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use oxigram_errors::Error;
use oxigram_mtproto::handshake::NewKey;
use oxigram_mtproto::session::{Backend, Call, RpcError, StoredKey};
use oxigram_mtproto::{AuthKey, ServerKey};
use oxigram_tl::{Identifiable, functions};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::Gateway;

pub use advertised::{Advertised, advertised};

/// The door's state: the gateway it calls and the server's RSA key.
pub struct Door {
    gateway: Arc<Gateway>,
    key: ServerKey,
    /// Login codes of sign-ins that found no account, for the sign-up after them.
    codes: Mutex<HashMap<String, String>>,
    /// The connections that get live updates.
    feeds: feed::Feeds,
    /// Keys whose device model this process has recorded.
    described: Mutex<HashSet<i64>>,
    /// Uploads completed for media sends, for a send of the same file again.
    uploads: media::Uploads,
    /// Where `help.getConfig` tells clients the door is.
    advertised: Advertised,
}

/// The `x-oxigram-auth-key` value a key's calls carry: the key's own, or that of the permanent
/// key a temporary key is bound to (cached with the auth keys, see `cache`). A key expired or
/// ended since its connection found it (replaced by another binding of its permanent key) is
/// unknown: the connection ends with `-404`.
async fn acting_header(gateway: &Gateway, auth_key_id: i64) -> Result<String, RpcError> {
    if let Some(header) = gateway.caches.acting_key(auth_key_id) {
        return Ok(header);
    }
    let (id, key) = keys::acting_key(&gateway.pool, auth_key_id)
        .await
        .map_err(|e| convert::rpc_error(&Error::from(e).into()))?
        .ok_or_else(RpcError::unknown_key)?;
    let header = format!("{id}:{}", hex::encode(key));
    gateway.caches.put_acting_key(auth_key_id, header.clone());
    Ok(header)
}

/// Whether an acting header is the key's own (a permanent key, or a temporary one not bound).
fn acts_as_itself(auth_key_id: i64, header: &str) -> bool {
    header
        .split_once(':')
        .is_some_and(|(id, _)| id == auth_key_id.to_string())
}

impl Door {
    /// Records the key's device model once per process (a failure is only logged: the call
    /// goes on, and a later connection records it).
    async fn describe(&self, call: &Call) {
        let Some(model) = call.device_model.as_deref() else {
            return;
        };
        let fresh = self
            .described
            .lock()
            .map(|mut d| d.insert(call.auth_key_id))
            .unwrap_or(false);
        if fresh
            && let Err(error) = keys::describe(&self.gateway.pool, call.auth_key_id, model).await
        {
            tracing::warn!(%error, "cannot record an MTProto key's device model");
            if let Ok(mut described) = self.described.lock() {
                described.remove(&call.auth_key_id);
            }
        }
    }
}

impl Backend for Door {
    fn server_key(&self) -> &ServerKey {
        &self.key
    }

    async fn find_key(&self, auth_key_id: i64) -> Option<StoredKey> {
        let (bytes, expires_at) = keys::find(&self.gateway.pool, auth_key_id).await.ok()??;
        let bytes: [u8; 256] = bytes.try_into().ok()?;
        Some(StoredKey {
            key: AuthKey::from_bytes(bytes),
            expires_at,
        })
    }

    async fn save_key(&self, key: &NewKey) -> Result<(), String> {
        let bytes = key.key.bytes();
        let stored = keys::insert(
            &self.gateway.pool,
            key.key.id(),
            &Sha256::digest(bytes),
            bytes,
            key.expires_at,
        )
        .await
        .map_err(|e| e.to_string())?;
        // A 64-bit id collision of two random keys: the client is refused and starts over.
        if stored {
            Ok(())
        } else {
            Err("auth key id taken".into())
        }
    }

    async fn bind_temp_key(&self, temp: i64, perm: i64, expires_at: i32) -> Result<(), RpcError> {
        let bound = keys::bind_temp(&self.gateway.pool, temp, perm, expires_at)
            .await
            .map_err(|e| convert::rpc_error(&Error::from(e).into()))?;
        match bound {
            keys::Binding::Bound { mut ended } => {
                // This instance at once; the others when they next ask which keys were rebound.
                ended.push(temp);
                self.gateway.caches.forget_acting_keys(&ended);
                Ok(())
            }
            keys::Binding::Refused => Err(RpcError::new(400, "TEMP_AUTH_KEY_ALREADY_BOUND")),
            keys::Binding::Ended => Err(RpcError::unknown_key()),
        }
    }

    async fn call(&self, call: Call, query: Vec<u8>) -> Result<Vec<u8>, RpcError> {
        let header = acting_header(&self.gateway, call.auth_key_id).await?;
        self.describe(&call).await;
        let started = std::time::Instant::now();
        let answer = api::answer(self, &header, &call, &query).await;
        metrics::call(
            oxigram_tl::constructor_id(&query),
            &answer,
            started.elapsed(),
        );
        // A connection gets pushes once it has made a call signed in (the feed checks that).
        if answer.is_ok() && !SIGNED_OUT_CALLS.contains(&oxigram_tl::constructor_id(&query)) {
            self.feeds.ensure(&self.gateway, &call, &header).await;
        }
        answer
    }
}

/// Calls a client makes before it is signed in (or to sign out): they start no feed.
const SIGNED_OUT_CALLS: [Option<u32>; 4] = [
    Some(<functions::help::GetConfig as Identifiable>::CONSTRUCTOR_ID),
    Some(<functions::help::GetNearestDc as Identifiable>::CONSTRUCTOR_ID),
    Some(<functions::auth::SendCode as Identifiable>::CONSTRUCTOR_ID),
    Some(<functions::auth::LogOut as Identifiable>::CONSTRUCTOR_ID),
];

/// Loads the server's RSA key from its PEM file.
pub fn load_key(path: &str) -> anyhow::Result<ServerKey> {
    let pem =
        std::fs::read_to_string(path).with_context(|| format!("reading MTProto RSA key {path}"))?;
    ServerKey::from_pem(&pem).with_context(|| format!("MTProto RSA key {path}"))
}

/// Serves the door until shutdown when `[mtproto] listen` is set.
pub async fn serve(gateway: Arc<Gateway>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let config = gateway.config.mtproto.clone();
    let Some(listen) = config.listen else {
        return Ok(());
    };
    let path = config
        .rsa_key_file
        .as_deref()
        .context("[mtproto] listen is set but rsa_key_file is not")?;
    let key = load_key(path)?;
    let advertised = advertised(&config, listen).map_err(anyhow::Error::msg)?;
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding the MTProto door to {listen}"))?;
    tracing::info!(
        %listen,
        public_host = advertised.host,
        public_port = advertised.port,
        fingerprint = key.fingerprint(),
        "MTProto door open"
    );
    let door = Arc::new(Door {
        gateway,
        key,
        codes: Mutex::default(),
        feeds: feed::Feeds::default(),
        described: Mutex::default(),
        uploads: media::Uploads::default(),
        advertised,
    });
    tokio::select! {
        served = oxigram_mtproto::server::serve(listener, door) => served.context("MTProto door"),
        () = shutdown.cancelled() => Ok(()),
    }
}
