//! Group commit of sends: the sends that arrive while a send transaction runs share the next
//! one, and their events reach svc-updates in one Append, so a burst of sends costs a few
//! transactions and calls instead of one each. There is no added delay: a lone send starts
//! its transaction at once. Every send of a group whose transaction failed runs again as a
//! group of its own. A forward of several messages is one job: its sends share a transaction
//! and it is answered once, when all of them are.

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

/// The answer of a job: one response per send, in order.
type Reply = oneshot::Sender<Result<Vec<SendMessageResponse>, Status>>;

/// The sends of one call (a send, or the forwards of a call), answered together.
struct Job {
    sends: Vec<NewMessage>,
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
        self.send_all(vec![send])
            .await?
            .pop()
            .ok_or_else(|| status(ErrorCode::Internal, "a send got no answer"))
    }

    /// Sends these in the same transaction (at most [`MAX_GROUP`]); one answer per send, in
    /// order, or the refusal of the first send refused.
    pub async fn send_all(
        &self,
        sends: Vec<NewMessage>,
    ) -> Result<Vec<SendMessageResponse>, Status> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Job { sends, reply })
            .await
            .map_err(|_| status(ErrorCode::Unavailable, "the send queue is closed"))?;
        answer
            .await
            .map_err(|_| status(ErrorCode::Internal, "the send worker stopped"))?
    }
}

async fn run(rx: Arc<Mutex<mpsc::Receiver<Job>>>, sender: Arc<Sender>) {
    loop {
        let Some(jobs) = next_batch(&mut *rx.lock().await, MAX_GROUP, |j| j.sends.len()).await
        else {
            return;
        };
        // Each job's sends, in order, and how many each job has.
        let sizes: Vec<usize> = jobs.iter().map(|j| j.sends.len()).collect();
        let (sends, replies): (Vec<Vec<NewMessage>>, Vec<Reply>) =
            jobs.into_iter().map(|j| (j.sends, j.reply)).unzip();
        let sends: Vec<NewMessage> = sends.into_iter().flatten().collect();
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
                tokio::spawn(
                    hand_off(sender.clone(), sends, outcomes, sizes, replies).instrument(span),
                );
            }
            Err(err) => {
                // A lost connection makes the pool test its idle ones before the sends run
                // alone, so they do not land on connections dead for the same reason.
                oxigram_storage::health::note(&err);
                tracing::warn!(parent: &span, error = %err, sends = sends.len(), "a shared send transaction failed; each send runs on its own");
                let mut sends = sends.into_iter();
                for (size, reply) in sizes.into_iter().zip(replies) {
                    spawn_alone(sender.clone(), sends.by_ref().take(size).collect(), reply);
                }
            }
        }
    }
}

/// Hands the group's events to svc-updates in one call and answers each job (`sizes`: how
/// many of the sends, in order, each job has).
async fn hand_off(
    sender: Arc<Sender>,
    sends: Vec<NewMessage>,
    outcomes: Vec<SendOutcome>,
    sizes: Vec<usize>,
    replies: Vec<Reply>,
) {
    let (mut events, mut rows) = (vec![], vec![]);
    // Each job still to answer, with the sender's event id and message of each of its sends.
    let mut waiting = Vec::with_capacity(replies.len());
    let mut sent = sends.into_iter().zip(outcomes);
    for (size, reply) in sizes.into_iter().zip(replies) {
        let mut answers = Vec::with_capacity(size);
        let mut refused = None;
        for (send, outcome) in sent.by_ref().take(size) {
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
                    answers.push((own, message, send.request.random_id));
                    events.extend(updates_events);
                    rows.extend(updates_rows);
                }
                // Its event went to svc-updates with the first send: asked again, it answers
                // the pts that send got.
                SendOutcome::Replayed { message, event } => {
                    answers.push((event.event_id.clone(), message, send.request.random_id));
                    events.push(*event);
                }
                SendOutcome::KeyReused => {
                    refused.get_or_insert_with(|| {
                        status(
                            ErrorCode::RandomIdDuplicate,
                            "random_id was already used for a different message",
                        )
                    });
                }
                SendOutcome::ReplyInvalid => {
                    refused.get_or_insert_with(|| {
                        status(
                            ErrorCode::ReplyMessageIdInvalid,
                            "reply_to_msg_id names no message of this chat",
                        )
                    });
                }
                SendOutcome::QuoteInvalid => {
                    refused.get_or_insert_with(|| {
                        status(
                            ErrorCode::QuoteTextInvalid,
                            "the quote does not occur in the replied message's text",
                        )
                    });
                }
            }
        }
        match refused {
            Some(refusal) => {
                let _ = reply.send(Err(refusal));
            }
            None => waiting.push((answers, reply)),
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
    for (answers, reply) in waiting {
        let responses = answers
            .into_iter()
            .map(|(event_id, message, random_id)| {
                let (pts, pts_count) = appended.get(&event_id).copied().unwrap_or((0, 0));
                SendMessageResponse {
                    message: Some(message),
                    pts,
                    pts_count,
                    random_id,
                }
            })
            .collect();
        let _ = reply.send(Ok(responses));
    }
}

/// The sends of a job of a group whose transaction failed, as a group of their own.
fn spawn_alone(sender: Arc<Sender>, sends: Vec<NewMessage>, reply: Reply) {
    let span = tracing::info_span!("messages.send_alone", sends = sends.len());
    oxigram_telemetry::propagation::continue_stored(
        &span,
        sends.iter().filter_map(|s| s.traceparent.as_deref()),
    );
    tokio::spawn(
        async move {
            match send::send(&sender.pool, &sender.outbox, &sends).await {
                Ok(outcomes) => {
                    let sizes = vec![sends.len()];
                    hand_off(sender, sends, outcomes, sizes, vec![reply]).await
                }
                Err(err) => {
                    let _ = reply.send(Err(Error::from(err).into()));
                }
            }
        }
        .instrument(span),
    );
}
