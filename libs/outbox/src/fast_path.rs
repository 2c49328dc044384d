//! The fast path to one destination: rows just committed are delivered at once by a single
//! delivery loop, which takes every hand-off queued while its previous call was in flight into
//! the next call. A lone hand-off goes out immediately; a burst shares a few calls, the way a
//! relay batch would, without the relay's claim. What the fast path fails to deliver stays in
//! the outbox for the relay, after its grace.

use std::{collections::HashMap, sync::Arc, time::Duration};

use tokio::sync::mpsc;
use tracing::Instrument;

use crate::{
    MAX_CALL, NewRow, Outbox, OutboxMessage, batch::next_batch_lingering, relay::Destination,
};

/// Hand-offs waiting before they are left to the relay.
const QUEUE: usize = 4096;

/// Committed rows and their outbox ids, as [`Outbox::enqueue`] returned them.
struct HandOffBatch {
    ids: Vec<i64>,
    rows: Vec<NewRow>,
}

/// The fast path of one destination.
#[derive(Clone)]
pub struct FastPath {
    queue: mpsc::Sender<HandOffBatch>,
}

impl FastPath {
    /// Starts the delivery loop. Must be called inside a Tokio runtime. With a non-zero
    /// `linger`, each call waits that long after its first hand-off so the hand-offs of that
    /// while share it: fewer, larger calls make fewer transactions at the destination, and
    /// that CPU goes to the paths people wait on. Zero delivers at once.
    pub fn start<D: Destination>(outbox: Outbox, destination: Arc<D>, linger: Duration) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(deliver_loop(outbox, destination, rx, linger));
        Self { queue }
    }

    /// Hands committed rows to the delivery loop. When the
    /// loop is too far behind the rows are left to the relay.
    pub fn hand_off(&self, ids: Vec<i64>, rows: Vec<NewRow>) {
        if rows.is_empty() {
            return;
        }
        if self.queue.try_send(HandOffBatch { ids, rows }).is_err() {
            tracing::debug!("fast path queue full; the relay will deliver");
        }
    }
}

impl Outbox {
    /// The fast path a producer awaits, when it needs the destination's answer (a send
    /// answers with the pts its events got): `delivery` is the call carrying the rows `ids`
    /// of `destination`. When it succeeds the rows leave the outbox; when it fails they stay
    /// for the relay, and the answer is `None`; so they do when it takes longer than the
    /// fast-path grace.
    pub async fn deliver_now<T, E: std::fmt::Display>(
        &self,
        destination: &'static str,
        ids: &[i64],
        delivery: impl Future<Output = Result<T, E>>,
    ) -> Option<T> {
        // Past the grace the relay may deliver the rows itself, and the producer's own caller
        // must not wait on a destination that hangs: the answer goes without it.
        match tokio::time::timeout(self.config.fast_path_grace, delivery).await {
            Ok(Ok(answer)) => {
                if !ids.is_empty() {
                    self.ack(destination, ids.to_vec());
                }
                Some(answer)
            }
            Ok(Err(error)) => {
                tracing::warn!(destination, %error, "fast-path delivery failed; the relay will retry");
                None
            }
            Err(_) => {
                tracing::warn!(
                    destination,
                    "fast-path delivery outlasted its grace; the relay will retry"
                );
                None
            }
        }
    }
}

async fn deliver_loop<D: Destination>(
    outbox: Outbox,
    destination: Arc<D>,
    mut rx: mpsc::Receiver<HandOffBatch>,
    linger: Duration,
) {
    while let Some(hand_offs) =
        next_batch_lingering(&mut rx, MAX_CALL, |h| h.rows.len(), linger).await
    {
        for (ids, batch) in calls(hand_offs) {
            let span = crate::relay::delivery_span::<D>(outbox.schema, &batch);
            match destination.deliver(&batch).instrument(span).await {
                Ok(()) => outbox.ack(D::NAME, ids),
                Err(error) => {
                    tracing::warn!(destination = D::NAME, %error, events = batch.len(), "fast-path delivery failed; the relay will retry");
                }
            }
        }
    }
}

/// The hand-offs' events as calls (see [`crate::batch::calls`]); a row's events may have been
/// handed off apart.
fn calls(hand_offs: Vec<HandOffBatch>) -> Vec<(Vec<i64>, Vec<OutboxMessage>)> {
    // Each row's events, rows in the order first seen.
    let mut rows: Vec<(i64, Vec<OutboxMessage>)> = Vec::new();
    let mut place: HashMap<i64, usize> = HashMap::new();
    for h in hand_offs {
        for (id, r) in h.ids.into_iter().zip(h.rows) {
            let at = *place.entry(id).or_insert_with(|| {
                rows.push((id, Vec::new()));
                rows.len() - 1
            });
            rows[at].1.push(OutboxMessage {
                id,
                event_id: r.event_id,
                payload: r.payload,
                attempts: 0,
                traceparent: r.traceparent,
            });
        }
    }
    crate::batch::calls(rows)
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn hand_off(ids: &[i64]) -> HandOffBatch {
        HandOffBatch {
            ids: ids.to_vec(),
            rows: ids
                .iter()
                .map(|_| NewRow {
                    destination: "dialogs",
                    event_id: Uuid::new_v4(),
                    payload: vec![],
                    traceparent: None,
                })
                .collect(),
        }
    }

    /// Calls stay within the receivers' limit, and a row's events, even when handed off
    /// apart, share one call.
    #[test]
    fn calls_never_split_a_row() {
        let big = vec![1; MAX_CALL - 1];
        let calls = calls(vec![hand_off(&big), hand_off(&[2, 2, 1]), hand_off(&[3])]);
        let shapes: Vec<(usize, Vec<i64>)> = calls
            .iter()
            .map(|(ids, batch)| {
                let mut rows = ids.clone();
                rows.dedup();
                (batch.len(), rows)
            })
            .collect();
        assert_eq!(
            shapes,
            vec![(MAX_CALL, vec![1]), (3, vec![2, 3])],
            "row 1's late event joins its row; row 2 does not fit beside it"
        );
        for (ids, batch) in &calls {
            assert!(ids.iter().zip(batch).all(|(id, m)| *id == m.id));
        }
    }
}
