//! Live updates of an MTProto connection. A connection whose key is signed in gets them once it
//! made a call (as Telegram starts pushing after a session's first call): the gRPC door's own
//! update stream (`Updates.Stream` from now on, attached to the hub and routed by dispatch like
//! any device's), each event translated to the Updates Telegram pushes for it. The feed ends
//! with the connection, when the device logs out, at shutdown, or, for a temporary key, once
//! another temporary key is bound to its permanent key.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use oxigram_mtproto::session::{Call, Outgoing, Pusher};
use oxigram_proto::api::v1::{StreamRequest, updates_server::Updates};
use oxigram_tl::Serializable;

use super::{api, updates};
use crate::{
    Gateway,
    updates_api::{EventStream, UpdatesApi},
};

/// The connections that have a feed, by connection id.
#[derive(Default, Clone)]
pub struct Feeds(Arc<Mutex<HashSet<u64>>>);

impl Feeds {
    /// Starts the feed of the call's connection unless it has one. The stream is attached
    /// before this returns, so before the call's answer leaves: whatever is committed once the
    /// client holds the answer is pushed to it.
    pub async fn ensure(&self, gateway: &Arc<Gateway>, call: &Call, header: &str) {
        let fresh = self
            .0
            .lock()
            .map(|mut live| live.insert(call.connection_id))
            .unwrap_or(false);
        if !fresh {
            return;
        }
        let Some((user_id, events)) = open(gateway, header).await else {
            self.forget(call.connection_id);
            return;
        };
        let (feeds, gateway) = (self.clone(), gateway.clone());
        let (push, connection_id) = (call.push.clone(), call.connection_id);
        let bound = (!super::acts_as_itself(call.auth_key_id, header)).then_some(call.auth_key_id);
        tokio::spawn(async move {
            run(&gateway, user_id, events, &push, bound).await;
            feeds.forget(connection_id);
        });
    }

    fn forget(&self, connection_id: u64) {
        if let Ok(mut live) = self.0.lock() {
            live.remove(&connection_id);
        }
    }
}

/// The key's user and its update stream from now on, attached to the hub; none for a key not
/// signed in (which opens no stream, as streams are rate-limited).
async fn open(gateway: &Arc<Gateway>, header: &str) -> Option<(i64, EventStream)> {
    let signed = api::request(header, ()).ok()?;
    let (me, ()) = gateway.signed_in(signed).await.ok()?;
    let request = api::request(header, StreamRequest { pts: 0 }).ok()?;
    match UpdatesApi(gateway.clone()).stream(request).await {
        Ok(stream) => Some((me.user_id, stream.into_inner())),
        Err(status) => {
            tracing::debug!(%status, "no update stream for an MTProto connection");
            None
        }
    }
}

/// Feeds one connection until it closes or its stream ends; `bound`, the connection's
/// temporary key when it acts for a permanent one.
async fn run(
    gateway: &Arc<Gateway>,
    user_id: i64,
    mut events: EventStream,
    push: &Pusher,
    bound: Option<i64>,
) {
    let _open = super::metrics::feed_opened();
    let mut known = HashSet::from([user_id]);
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            () = push.closed() => return,
        };
        let Some(Ok(event)) = event else {
            return;
        };
        // The stream is the permanent key's, which a replaced temporary key no longer acts for:
        // it gets nothing more (from the moment it was replaced on the instance that bound the
        // new key, within the cache's check on the others), and its next call ends its
        // connection. A failure to tell is not a replacement: the push goes on.
        if let Some(key) = bound
            && super::acting_header(gateway, key)
                .await
                .is_err_and(|e| e.is_unknown_key())
        {
            return;
        }
        match updates::pushed(gateway, user_id, event, &mut known).await {
            Ok(Some(pushed)) => {
                let outgoing = Outgoing {
                    body: pushed.to_bytes(),
                    content_related: true,
                };
                if push.send(outgoing).is_err() {
                    return;
                }
                super::metrics::pushed();
            }
            Ok(None) => {}
            // The event's users could not be read: the client catches up by getDifference.
            Err(status) => {
                tracing::debug!(%status, "an MTProto push could not be made");
                let too_long = Outgoing {
                    body: oxigram_tl::enums::Updates::TooLong.to_bytes(),
                    content_related: true,
                };
                if push.send(too_long).is_err() {
                    return;
                }
            }
        }
    }
}
