//! The fast path to one destination: rows just committed are delivered at once by a single
//! delivery loop, which takes every hand-off queued while its previous call was in flight into
//! the next call. A lone hand-off goes out immediately; a burst shares a few calls, the way a
//! relay batch would, without the relay's claim. What the fast path fails to deliver stays in
//! the outbox for the relay, after its grace.

use std::{sync::Arc, time::Duration};

use tokio::sync::mpsc;
use tracing::Instrument;

use crate::{NewRow, Outbox, OutboxMessage, batch::next_batch_lingering, relay::Destination};

/// Hand-offs waiting before they are left to the relay.
const QUEUE: usize = 4096;

/// Rows one call takes at most.
const MAX_CALL: usize = 1000;

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

async fn deliver_loop<D: Destination>(
    outbox: Outbox,
    destination: Arc<D>,
    mut rx: mpsc::Receiver<HandOffBatch>,
    linger: Duration,
) {
    while let Some(hand_offs) =
        next_batch_lingering(&mut rx, MAX_CALL, |h| h.rows.len(), linger).await
    {
        let (mut ids, mut rows) = (Vec::new(), Vec::new());
        for h in hand_offs {
            ids.extend(h.ids);
            rows.extend(h.rows);
        }
        let batch: Vec<OutboxMessage> = ids
            .iter()
            .zip(rows)
            .map(|(&id, r)| OutboxMessage {
                id,
                event_id: r.event_id,
                payload: r.payload,
                attempts: 0,
                traceparent: r.traceparent,
            })
            .collect();
        let span = crate::relay::delivery_span::<D>(outbox.schema, &batch);
        match destination.deliver(&batch).instrument(span).await {
            Ok(()) => outbox.ack(D::NAME, ids),
            Err(error) => {
                tracing::warn!(destination = D::NAME, %error, rows = batch.len(), "fast-path delivery failed; the relay will retry");
            }
        }
    }
}
