//! Live updates of an MTProto connection. A connection whose key is signed in gets them once it
//! made a call (as Telegram starts pushing after a session's first call): the gRPC door's own
//! update stream (`Updates.Stream` from now on, attached to the hub and routed by dispatch like
//! any device's), each event translated to the Updates Telegram pushes for it. The feed ends
//! with the connection, when the device logs out, or at shutdown.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use oxigram_mtproto::session::{Call, Outgoing, Pusher};
use oxigram_proto::api::v1::{StreamRequest, updates_server::Updates};
use oxigram_tl::Serializable;

use super::{api, updates};
use crate::{Gateway, updates_api::UpdatesApi};

/// The connections that have a feed, by connection id.
#[derive(Default, Clone)]
pub struct Feeds(Arc<Mutex<HashSet<u64>>>);

impl Feeds {
    /// Starts the feed of the call's connection unless it has one.
    pub fn ensure(&self, gateway: &Arc<Gateway>, call: &Call, header: &str) {
        let fresh = self
            .0
            .lock()
            .map(|mut live| live.insert(call.connection_id))
            .unwrap_or(false);
        if !fresh {
            return;
        }
        let (feeds, gateway, header) = (self.clone(), gateway.clone(), header.to_owned());
        let (push, connection_id) = (call.push.clone(), call.connection_id);
        tokio::spawn(async move {
            run(&gateway, &header, &push).await;
            if let Ok(mut live) = feeds.0.lock() {
                live.remove(&connection_id);
            }
        });
    }
}

/// Feeds one connection until it closes or its stream ends.
async fn run(gateway: &Arc<Gateway>, header: &str, push: &Pusher) {
    // A key not signed in has nothing to be fed (and opens no stream, which is rate-limited).
    let Ok(signed) = api::request(header, ()) else {
        return;
    };
    let Ok((me, ())) = gateway.signed_in(signed).await else {
        return;
    };
    let Ok(request) = api::request(header, StreamRequest { pts: 0 }) else {
        return;
    };
    let mut events = match UpdatesApi(gateway.clone()).stream(request).await {
        Ok(stream) => stream.into_inner(),
        Err(status) => {
            tracing::debug!(%status, "no update stream for an MTProto connection");
            return;
        }
    };
    let _open = super::metrics::feed_opened();
    let mut known = HashSet::from([me.user_id]);
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            () = push.closed() => return,
        };
        let Some(Ok(event)) = event else {
            return;
        };
        match updates::pushed(gateway, me.user_id, event, &mut known).await {
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
