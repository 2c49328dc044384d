//! Group commit of appends: appends that arrive while a transaction runs wait for the next one
//! and share it, so a burst of sends costs a few transactions instead of one each. There is
//! no added delay: a lone append starts its transaction at once. Users are split among a few
//! workers by id, so two transactions never wait on each other's user rows; an append that
//! spans workers waits for each of its parts.

use oxigram_outbox::{Outbox, next_batch};
use oxigram_proto::updates::v1::Appended;
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use crate::{
    log::{self, ValidEvent},
    outbound::HandOffs,
};

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
    /// One queue per worker; a user's events always go to the same one.
    queues: Vec<mpsc::Sender<Job>>,
}

impl Batcher {
    /// Starts `workers` transaction runners.
    pub fn start(
        pool: PgPool,
        outbox: Outbox,
        hand_offs: HandOffs,
        retain: u32,
        workers: usize,
    ) -> Self {
        let queues = (0..workers.max(1))
            .map(|_| {
                let (queue, rx) = mpsc::channel(QUEUE);
                let log = Log {
                    pool: pool.clone(),
                    outbox: outbox.clone(),
                    hand_offs: hand_offs.clone(),
                    retain,
                    last: log::LastPts::default(),
                };
                tokio::spawn(run(rx, log));
                queue
            })
            .collect();
        Self { queues }
    }

    /// Appends `events` in the next shared transactions; returns their pts in input order.
    pub async fn append(&self, events: Vec<ValidEvent>) -> Result<Vec<Appended>, String> {
        let (n, total) = (self.queues.len(), events.len());
        // (worker, the input positions it takes, their events)
        let mut parts: Vec<(Vec<usize>, Vec<ValidEvent>)> =
            (0..n).map(|_| (vec![], vec![])).collect();
        for (at, e) in events.into_iter().enumerate() {
            let part = &mut parts[e.event.user_id.rem_euclid(n as i64) as usize];
            part.0.push(at);
            part.1.push(e);
        }
        let mut answers = Vec::new();
        for ((positions, events), queue) in parts.into_iter().zip(&self.queues) {
            if events.is_empty() {
                continue;
            }
            let (reply, answer) = oneshot::channel();
            queue
                .send(Job { events, reply })
                .await
                .map_err(|_| "the append queue is closed".to_owned())?;
            answers.push((positions, answer));
        }
        let mut out: Vec<Option<Appended>> = vec![None; total];
        for (positions, answer) in answers {
            let appended = answer
                .await
                .map_err(|_| "the append worker stopped".to_owned())??;
            for (at, a) in positions.into_iter().zip(appended) {
                out[at] = Some(a);
            }
        }
        out.into_iter()
            .map(|a| a.ok_or_else(|| "an append worker answered short".to_owned()))
            .collect()
    }
}

/// What a worker writes with and hands its push jobs and logged events to.
struct Log {
    pool: PgPool,
    outbox: Outbox,
    hand_offs: HandOffs,
    retain: u32,
    /// The pts of the users this worker appended for: the users are this worker's alone.
    last: log::LastPts,
}

async fn run(mut rx: mpsc::Receiver<Job>, mut log: Log) {
    loop {
        let Some(jobs) = next_batch(&mut rx, MAX_BATCH_EVENTS, |j: &Job| j.events.len()).await
        else {
            return;
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
        let outcome = log::append(&log.pool, &log.outbox, events, log.retain, &mut log.last)
            .instrument(span)
            .await;
        match outcome {
            Ok(log::Written {
                appended,
                job_ids,
                jobs,
            }) => {
                // Committed: hand on now; the relays cover a failure.
                log.hand_offs.hand_off((job_ids, jobs));
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
