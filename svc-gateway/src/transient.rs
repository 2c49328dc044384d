//! How transient events (typing, presence) travel: never logged, never in an outbox. The
//! gateway that makes one looks the receivers' online devices up in the route table and
//! pushes each gateway instance holding some of them its events in one call (itself through
//! its hub, without a call); the receiving instance offers them to the streams with room, and
//! each stream drops a typing event that has grown late on the way. A receiver that is offline,
//! or whose push fails, misses the event: the next one (or the stored status) replaces it.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use oxigram_proto::{
    api::v1::{StreamEvent, stream_event},
    gateway::v1::TransientEvent,
};
use oxigram_routes::RouteLookup;

use crate::{hub::Hub, outbound::PeerGateways};

/// How long a typing action shows on the receiving side, unless renewed (clients repeat it
/// every few seconds while it lasts).
pub const TYPING_TIMEOUT: Duration = Duration::from_secs(6);
/// A typing event older than this when it reaches the device's stream is dropped: what it
/// says is stale, and a fresher one follows if the action goes on.
pub const TYPING_LATE: Duration = Duration::from_secs(2);
/// Longest a transient push may take: it is not worth holding a caller for.
const PUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// The event a stream sends, `age_ms` after it was made: a typing event late by then is
/// dropped (`None`), an earlier one shows for what is left of its timeout.
pub fn on_time(mut event: StreamEvent, age_ms: i64) -> Option<StreamEvent> {
    if let Some(stream_event::Kind::UserTyping(typing)) = &mut event.kind {
        if age_ms > TYPING_LATE.as_millis() as i64 {
            return None;
        }
        if typing.timeout_ms > 0 {
            typing.timeout_ms = (typing.timeout_ms - age_ms.max(0) as i32).max(1);
        }
    }
    Some(event)
}

/// The way out of transient events from this instance.
pub struct Transient {
    pub routes: RouteLookup,
    pub hub: Arc<Hub>,
    pub peer_gateways: PeerGateways,
    /// This instance's own push endpoint: its events go to its hub directly.
    pub push_endpoint: String,
}

impl Transient {
    /// Pushes each event to the online devices of its user; returns how many gateway
    /// instances were asked. Failures are logged and dropped: the events are transient.
    pub async fn push(&self, events: Vec<TransientEvent>) -> usize {
        if events.is_empty() {
            return 0;
        }
        let users: Vec<i64> = events.iter().map(|e| e.user_id).collect();
        let lookup = match self.routes.lookup_many(&users).await {
            Ok(lookup) => lookup,
            Err(err) => {
                tracing::debug!(error = %err, "transient events dropped: no routes");
                return 0;
            }
        };
        let mut by_instance: BTreeMap<&str, Vec<TransientEvent>> = BTreeMap::new();
        for event in events {
            let mut instances: Vec<&str> = lookup
                .routes
                .get(&event.user_id)
                .into_iter()
                .flatten()
                .map(|r| r.push_endpoint.as_str())
                .collect();
            instances.sort_unstable();
            instances.dedup();
            for instance in instances {
                by_instance.entry(instance).or_default().push(event.clone());
            }
        }
        let asked = by_instance.len();
        let pushes = by_instance
            .into_iter()
            .map(|(instance, events)| async move {
                if instance == self.push_endpoint {
                    self.hub.push_transient_paced(&events).await;
                    return;
                }
                let pushed = tokio::time::timeout(
                    PUSH_TIMEOUT,
                    self.peer_gateways.push_transient(instance, events),
                )
                .await;
                match pushed {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => {
                        tracing::debug!(instance, error = %err, "transient push failed")
                    }
                    Err(_) => tracing::debug!(instance, "transient push timed out"),
                }
            });
        futures::future::join_all(pushes).await;
        asked
    }
}

#[cfg(test)]
mod tests {
    use oxigram_proto::types::v1::{SendMessageAction, UpdateUserTyping, send_message_action};

    use super::*;

    fn typing(timeout_ms: i32) -> StreamEvent {
        StreamEvent {
            kind: Some(stream_event::Kind::UserTyping(UpdateUserTyping {
                user_id: 7,
                action: Some(SendMessageAction {
                    kind: send_message_action::Kind::Typing as i32,
                    progress: 0,
                }),
                timeout_ms,
            })),
        }
    }

    fn timeout_of(event: Option<StreamEvent>) -> Option<i32> {
        match event?.kind {
            Some(stream_event::Kind::UserTyping(t)) => Some(t.timeout_ms),
            _ => None,
        }
    }

    #[test]
    fn a_typing_event_shows_for_what_is_left_and_is_dropped_when_late() {
        let table = [
            (6000, 0, Some(6000)),
            (6000, 250, Some(5750)),
            (6000, 2000, Some(4000)),
            (6000, 2001, None),
            (6000, -50, Some(6000)),
            // A cancel stays a cancel.
            (0, 100, Some(0)),
            (0, 2500, None),
        ];
        for (timeout, age, expected) in table {
            assert_eq!(
                timeout_of(on_time(typing(timeout), age)),
                expected,
                "{timeout} {age}"
            );
        }
    }
}
