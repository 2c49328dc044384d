//! Group commit of sends: the sends that arrive while a send transaction runs share the next
//! one, and their events reach svc-updates in one Append, so a burst of sends costs a few
//! transactions and calls instead of one each. There is no added delay: a lone send starts
//! its transaction at once. Every send of a group whose transaction failed runs again as a
//! group of its own.

use std::{collections::HashMap, sync::Arc};

use oxigram_errors::{Error, ErrorCode, status};
use oxigram_outbox::{Outbox, next_batch};
use oxigram_proto::types::v1::SendMessageResponse;
use sqlx::PgPool;
use tokio::sync::{Mutex, mpsc, oneshot};
use tonic::Status;
use tracing::Instrument;

use crate::{
    outbound::ToUpdates,
    send::{self, NewMessage, SendOutcome, Sent},
};

/// Most sends one shared transaction takes.
pub const MAX_GROUP: usize = 256;
/// Sends waiting before callers feel backpressure.
const QUEUE: usize = 4096;

type Reply = oneshot::Sender<Result<SendMessageResponse, Status>>;

struct Job {
    send: NewMessage,
    reply: Reply,
}

/// What a send needs after validation: its database, its outbox and the way to svc-updates.
struct Sender {
    pool: PgPool,
    outbox: Outbox,
    to_updates: ToUpdates,
}

#[derive(Clone)]
pub struct GroupCommit {
    queue: mpsc::Sender<Job>,
}

impl GroupCommit {
    /// Starts `workers` transaction runners. Must be called inside a Tokio runtime.
    pub fn start(pool: PgPool, outbox: Outbox, to_updates: ToUpdates, workers: usize) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let sender = Arc::new(Sender {
            pool,
            outbox,
            to_updates,
        });
        for _ in 0..workers.max(1) {
            tokio::spawn(run(rx.clone(), sender.clone()));
        }
        Self { queue }
    }

    /// Sends in the next shared transaction; the answer carries the sender's pts (0 when
    /// svc-updates did not answer in time: the relay delivers and getDifference catches up).
    pub async fn send(&self, send: NewMessage) -> Result<SendMessageResponse, Status> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Job { send, reply })
            .await
            .map_err(|_| status(ErrorCode::Unavailable, "the send queue is closed"))?;
        answer
            .await
            .map_err(|_| status(ErrorCode::Internal, "the send worker stopped"))?
    }
}

async fn run(rx: Arc<Mutex<mpsc::Receiver<Job>>>, sender: Arc<Sender>) {
    loop {
        let Some(jobs) = next_batch(&mut *rx.lock().await, MAX_GROUP, |_| 1).await else {
            return;
        };
        let (sends, replies): (Vec<NewMessage>, Vec<Reply>) =
            jobs.into_iter().map(|j| (j.send, j.reply)).unzip();
        let span = tracing::info_span!("messages.send_group", sends = sends.len());
        oxigram_telemetry::propagation::continue_stored(
            &span,
            sends.iter().filter_map(|s| s.traceparent.as_deref()),
        );
        match send::send(&sender.pool, &sender.outbox, &sends)
            .instrument(span.clone())
            .await
        {
            // The hand-off runs beside the next group's transaction.
            Ok(outcomes) => {
                tokio::spawn(hand_off(sender.clone(), sends, outcomes, replies).instrument(span));
            }
            Err(err) => {
                // A lost connection makes the pool test its idle ones before the sends run
                // alone, so they do not land on connections dead for the same reason.
                oxigram_storage::health::note(&err);
                tracing::warn!(parent: &span, error = %err, sends = sends.len(), "a shared send transaction failed; each send runs on its own");
                for (send, reply) in sends.into_iter().zip(replies) {
                    spawn_alone(sender.clone(), send, reply);
                }
            }
        }
    }
}

/// Hands the group's events to svc-updates in one call and answers each send.
async fn hand_off(
    sender: Arc<Sender>,
    sends: Vec<NewMessage>,
    outcomes: Vec<SendOutcome>,
    replies: Vec<Reply>,
) {
    let (mut events, mut rows, mut waiting) = (vec![], vec![], vec![]);
    for ((send, outcome), reply) in sends.into_iter().zip(outcomes).zip(replies) {
        match outcome {
            SendOutcome::Sent(Sent {
                message,
                updates_events,
                updates_rows,
            }) => {
                let own = updates_events
                    .iter()
                    .find(|e| e.user_id == send.sender_id)
                    .map(|e| e.event_id.clone())
                    .unwrap_or_default();
                waiting.push((own, message, send.request.random_id, reply));
                events.extend(updates_events);
                rows.extend(updates_rows);
            }
            // Its event went to svc-updates with the first send: asked again, it answers the
            // pts that send got.
            SendOutcome::Replayed { message, event } => {
                waiting.push((
                    event.event_id.clone(),
                    message,
                    send.request.random_id,
                    reply,
                ));
                events.push(event);
            }
            SendOutcome::KeyReused => {
                let _ = reply.send(Err(status(
                    ErrorCode::RandomIdDuplicate,
                    "random_id was already used for a different message",
                )));
            }
            SendOutcome::ReplyInvalid => {
                let _ = reply.send(Err(status(
                    ErrorCode::ReplyMessageIdInvalid,
                    "reply_to_msg_id names no message of this chat",
                )));
            }
            SendOutcome::QuoteInvalid => {
                let _ = reply.send(Err(status(
                    ErrorCode::QuoteTextInvalid,
                    "the quote does not occur in the replied message's text",
                )));
            }
        }
    }
    if waiting.is_empty() {
        return;
    }
    // PERSISTED. The fast path: hand the events to svc-updates now; on failure the relay
    // will, and the clients learn their pts from getDifference.
    let appended: HashMap<String, (i32, i32)> = sender
        .to_updates
        .fast_path_all(&sender.outbox, events, &rows)
        .await
        .into_iter()
        .map(|a| (a.event_id, (a.pts, a.pts_count)))
        .collect();
    for (event_id, message, random_id, reply) in waiting {
        let (pts, pts_count) = appended.get(&event_id).copied().unwrap_or((0, 0));
        let _ = reply.send(Ok(SendMessageResponse {
            message: Some(message),
            pts,
            pts_count,
            random_id,
        }));
    }
}

/// A send of a group whose transaction failed, as a group of one.
fn spawn_alone(sender: Arc<Sender>, send: NewMessage, reply: Reply) {
    let span = tracing::info_span!("messages.send_alone");
    oxigram_telemetry::propagation::continue_stored(&span, send.traceparent.as_deref());
    tokio::spawn(
        async move {
            match send::send(&sender.pool, &sender.outbox, std::slice::from_ref(&send)).await {
                Ok(outcomes) => hand_off(sender, vec![send], outcomes, vec![reply]).await,
                Err(err) => {
                    let _ = reply.send(Err(Error::from(err).into()));
                }
            }
        }
        .instrument(span),
    );
}
