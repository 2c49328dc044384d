//! Group commit of appends: appends that arrive while a transaction runs wait for the next one
//! and share it, so a burst of sends costs a few transactions instead of one each. There is
//! no added delay: a lone append starts its transaction at once. A few workers take turns
//! draining the queue; their batches lock users in ascending id order, so they never deadlock.

use std::sync::Arc;

use oxigram_outbox::Outbox;
use oxigram_proto::internal::v1::Appended;
use sqlx::PgPool;
use tokio::sync::{Mutex, mpsc, oneshot};
use tracing::Instrument;

use crate::log::{self, ValidEvent};

/// Most events one shared transaction takes.
pub const MAX_BATCH_EVENTS: usize = 1000;
/// Appends waiting before callers feel backpressure.
const QUEUE: usize = 4096;

struct Job {
    events: Vec<ValidEvent>,
    reply: oneshot::Sender<Result<Vec<Appended>, String>>,
}

#[derive(Clone)]
pub struct Batcher {
    queue: mpsc::Sender<Job>,
}

impl Batcher {
    /// Starts `workers` transaction runners.
    pub fn start(pool: PgPool, outbox: Outbox, retain: u32, workers: usize) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..workers.max(1) {
            tokio::spawn(run(rx.clone(), pool.clone(), outbox.clone(), retain));
        }
        Self { queue }
    }

    /// Appends `events` in the next shared transaction; returns their pts in input order.
    pub async fn append(&self, events: Vec<ValidEvent>) -> Result<Vec<Appended>, String> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Job { events, reply })
            .await
            .map_err(|_| "the append queue is closed".to_owned())?;
        answer
            .await
            .map_err(|_| "the append worker stopped".to_owned())?
    }
}

async fn run(rx: Arc<Mutex<mpsc::Receiver<Job>>>, pool: PgPool, outbox: Outbox, retain: u32) {
    loop {
        let jobs = {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else { return };
            let mut size = first.events.len();
            let mut jobs = vec![first];
            while size < MAX_BATCH_EVENTS {
                match rx.try_recv() {
                    Ok(job) => {
                        size += job.events.len();
                        jobs.push(job);
                    }
                    Err(_) => break,
                }
            }
            jobs
        };
        let counts: Vec<usize> = jobs.iter().map(|j| j.events.len()).collect();
        let (events, replies): (Vec<Vec<ValidEvent>>, Vec<_>) =
            jobs.into_iter().map(|j| (j.events, j.reply)).unzip();
        let events: Vec<ValidEvent> = events.into_iter().flatten().collect();
        let span = tracing::info_span!(
            "updates.append_batch",
            events = events.len(),
            jobs = counts.len()
        );
        oxigram_telemetry::propagation::continue_stored(
            &span,
            events.iter().filter_map(|e| e.traceparent.as_deref()),
        );
        let outcome = log::append(&pool, &outbox, events, retain)
            .instrument(span)
            .await;
        match outcome {
            Ok(appended) => {
                let mut appended = appended.into_iter();
                for (reply, n) in replies.into_iter().zip(counts) {
                    let _ = reply.send(Ok(appended.by_ref().take(n).collect()));
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, jobs = replies.len(), "a shared append failed");
                for reply in replies {
                    let _ = reply.send(Err(err.to_string()));
                }
            }
        }
    }
}
