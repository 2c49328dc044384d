//! The relay: claims due outbox rows of one destination in batches, delivers them, and
//! records the outcome: delete on success; otherwise backoff, and a terminal failure only for
//! rows their destination refuses as malformed.

use std::{fmt, future::Future, sync::Arc, time::Duration};

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use crate::{batch, frame, metrics};

/// How a relay paces itself.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub batch_size: u32,
    /// How long a claimed row stays invisible to other relays; renewed while its delivery is
    /// in flight, so it only runs out on a relay that stopped (see `Relay::renewing_lease`).
    pub lease: Duration,
    /// How often an idle relay looks for due rows.
    pub poll: Duration,
    /// Attempts after which a row its destination refuses as malformed ([`Refused::permanent`])
    /// is kept as failed. Rows that failed for any other reason are retried for as long as it
    /// takes: each carries a fact its producer already promised.
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub fast_path_grace: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self::from_millis(200, 2_000, 500, 25, 100, 30_000, 2_000)
    }
}

/// One event to deliver, from a claimed row or a fast-path hand-off.
#[derive(Debug, Clone)]
pub struct OutboxMessage {
    /// The outbox row that holds it (a row holds several events).
    pub id: i64,
    pub event_id: Uuid,
    pub payload: Vec<u8>,
    pub attempts: i32,
    pub traceparent: Option<String>,
}

/// The payloads of a batch, each a protobuf message of type `M`; one that cannot be read can
/// never be delivered.
pub fn decode_payloads<M: prost::Message + Default>(
    batch: &[OutboxMessage],
) -> Result<Vec<M>, Refused> {
    batch
        .iter()
        .map(|m| M::decode(m.payload.as_slice()).map_err(|e| Refused::permanent(e.to_string())))
        .collect()
}

/// Why a delivery did not go through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub detail: String,
    /// The events can never be delivered as they are (their payload cannot be read, or the
    /// destination rejects them as malformed): after `max_attempts` their rows are kept as
    /// failed for an operator. Anything else (the destination is down, slow or overloaded)
    /// is retried without limit.
    pub permanent: bool,
    /// The destination took what it could and holds these back until events written before
    /// them arrive ([`Refused::waiting`]): they are due again after `backoff_base`, without
    /// the backoff growing.
    pub waiting: bool,
}

impl Refused {
    /// A failure that retrying can cure.
    pub fn transient(detail: impl Into<String>) -> Self {
        Self {
            detail: detail.into(),
            permanent: false,
            waiting: false,
        }
    }

    /// Events that no retry can deliver.
    pub fn permanent(detail: impl Into<String>) -> Self {
        Self {
            detail: detail.into(),
            permanent: true,
            waiting: false,
        }
    }

    /// Events the destination holds back until the ones before them arrive (a projection
    /// applied in order). The missing ones are usually rows backed off while the destination
    /// was down: growing these rows' backoff on every round that meets the gap would leave
    /// them waiting long after it filled, so they come due again after the base delay.
    pub fn waiting(detail: impl Into<String>) -> Self {
        Self {
            detail: detail.into(),
            permanent: false,
            waiting: true,
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.permanent {
            "permanent"
        } else if self.waiting {
            "waiting"
        } else {
            "transient"
        };
        write!(f, "{} ({kind})", self.detail)
    }
}

/// Where a relay hands rows off to (usually another service's idempotent gRPC method).
pub trait Destination: Send + Sync + 'static {
    /// The destination's name in the outbox table.
    const NAME: &'static str;

    /// Delivers a whole batch; an error makes every row of the batch retry.
    fn deliver(&self, batch: &[OutboxMessage]) -> impl Future<Output = Result<(), Refused>> + Send;
}

/// The span of one delivery, continuing the traces the rows were written in.
pub(crate) fn delivery_span<D: Destination>(
    schema: &'static str,
    batch: &[OutboxMessage],
) -> tracing::Span {
    let span = tracing::info_span!(
        "outbox.deliver",
        destination = D::NAME,
        schema,
        batch = batch.len()
    );
    oxigram_telemetry::propagation::continue_stored(
        &span,
        batch.iter().filter_map(|m| m.traceparent.as_deref()),
    );
    span
}

/// A destination shared between its relay and the producer's fast path.
impl<D: Destination> Destination for Arc<D> {
    const NAME: &'static str = D::NAME;

    fn deliver(&self, batch: &[OutboxMessage]) -> impl Future<Output = Result<(), Refused>> + Send {
        (**self).deliver(batch)
    }
}

/// What a round delivered: rows delivered, their events' count, and the rows to retry, each
/// group with its own refusal.
type Delivery = (Vec<i64>, usize, Vec<(Vec<i64>, Refused)>);

/// The relay of one destination.
pub struct Relay<D> {
    pool: PgPool,
    schema: &'static str,
    config: RelayConfig,
    destination: D,
}

impl<D: Destination> Relay<D> {
    pub(crate) fn new(
        pool: PgPool,
        schema: &'static str,
        config: RelayConfig,
        destination: D,
    ) -> Self {
        Self {
            pool,
            schema,
            config,
            destination,
        }
    }

    /// Runs until `shutdown`; never returns early on delivery or database errors.
    /// Boxed so that callers' futures stay provably `Send`.
    pub fn run(self, shutdown: CancellationToken) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(self.run_inner(shutdown))
    }

    async fn run_inner(self, shutdown: CancellationToken) {
        tracing::info!(
            schema = self.schema,
            destination = D::NAME,
            "outbox relay started"
        );
        let mut backlog = Backlog::default();
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            backlog.watch(&self).await;
            let idle = match self.round().await {
                Ok(n) => n < self.config.batch_size as usize,
                Err(err) => {
                    tracing::warn!(destination = D::NAME, error = %err, "outbox claim failed");
                    true
                }
            };
            if idle {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(self.config.poll) => {},
                }
            }
        }
        tracing::info!(
            schema = self.schema,
            destination = D::NAME,
            "outbox relay stopped"
        );
    }

    /// Claims and delivers one batch of rows; returns how many rows it claimed. Their events
    /// go out in calls of at most [`crate::MAX_CALL`] events, in the order written, a row never
    /// split between two calls, so each row is deleted or retried as a whole.
    pub async fn round(&self) -> Result<usize, sqlx::Error> {
        let rows = self.claim().await?;
        let claimed = rows.len();
        // Rows whose payload cannot be read: retried, then kept as failed.
        let mut unreadable: Vec<(i64, Refused)> = Vec::new();
        let mut readable = Vec::with_capacity(claimed);
        for row in rows {
            let id = row.id;
            match frame::decode(row) {
                Ok(events) => readable.push((id, events)),
                Err(error) => unreadable.push((id, Refused::permanent(error))),
            }
        }
        let leased: Vec<i64> = readable.iter().map(|(id, _)| *id).collect();
        let (delivered, events_delivered, refused) = self
            .renewing_lease(&leased, self.deliver_calls(readable))
            .await;
        for (ids, error) in refused {
            self.retry_later(&ids, error).await?;
        }
        for (id, error) in unreadable {
            tracing::warn!(destination = D::NAME, %error, row = id, "outbox row unreadable");
            self.retry_later(&[id], error).await?;
        }
        if !delivered.is_empty() {
            sqlx::query("DELETE FROM outbox WHERE id = ANY($1)")
                .bind(&delivered)
                .execute(&self.pool)
                .await?;
            metrics::delivered(self.schema, D::NAME, "relay", events_delivered as u64);
        }
        Ok(claimed)
    }

    /// Delivers the claimed rows' events call after call; returns the rows delivered, their
    /// events' count, and the rows left for a retry with their refusals.
    async fn deliver_calls(&self, readable: Vec<(i64, Vec<OutboxMessage>)>) -> Delivery {
        let mut delivered: Vec<i64> = Vec::new();
        let mut events_delivered = 0;
        let mut refused: Vec<(Vec<i64>, Refused)> = Vec::new();
        // After a refused call the rest of the round is not tried: the destination is likely
        // down, and calling it again within the round would only fail again. Those rows were
        // never offered, so they retry like the refused call's rows (waiting or backing off) but
        // never as permanently refused: that belongs to the refused call's rows alone, and must
        // not make good rows that merely shared its round fail once out of attempts.
        let mut untried: Option<(Vec<i64>, Refused)> = None;
        for (ids, batch) in batch::calls(readable) {
            if let Some((waiting, _)) = untried.as_mut() {
                waiting.extend(ids);
                continue;
            }
            let outcome = self
                .destination
                .deliver(&batch)
                .instrument(delivery_span::<D>(self.schema, &batch))
                .await;
            match outcome {
                Ok(()) => {
                    delivered.extend(ids);
                    events_delivered += batch.len();
                }
                Err(error) => {
                    tracing::warn!(destination = D::NAME, %error, events = batch.len(), "outbox delivery failed");
                    let not_tried = Refused {
                        detail: format!("not tried after a refused call: {}", error.detail),
                        permanent: false,
                        waiting: error.waiting,
                    };
                    untried = Some((Vec::new(), not_tried));
                    refused.push((ids, error));
                }
            }
        }
        refused.extend(untried.filter(|(ids, _)| !ids.is_empty()));
        (delivered, events_delivered, refused)
    }

    /// Runs `work` (the delivery of the rows `ids`) while renewing their lease every third of
    /// it. The lease is what hides a row from the other relays; kept short, the rows of a
    /// relay that died mid-delivery (a killed process) come due again within one lease, and
    /// the renewal keeps a slow delivery from being claimed twice. A renewal that fails (the
    /// database is away) is retried at the next tick: at worst the rows are delivered twice,
    /// which receivers deduplicate.
    async fn renewing_lease<T>(&self, ids: &[i64], work: impl Future<Output = T>) -> T {
        let every = (self.config.lease / 3).max(Duration::from_millis(10));
        let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tokio::pin!(work);
        loop {
            tokio::select! {
                outcome = &mut work => return outcome,
                _ = renew.tick() => {
                    let renewed = sqlx::query(include_str!("../sql/renew_lease.sql"))
                        .bind(ids)
                        .bind(self.config.lease.as_millis() as i64)
                        .execute(&self.pool)
                        .await;
                    if let Err(error) = renewed {
                        tracing::warn!(destination = D::NAME, %error, "cannot renew the outbox lease");
                    }
                }
            }
        }
    }

    /// Backs off rows whose delivery failed (capped exponential backoff with jitter; the base
    /// delay alone for rows waiting on earlier ones); a row refused permanently is kept as
    /// failed once out of attempts (primary key of outbox).
    async fn retry_later(&self, ids: &[i64], refused: Refused) -> Result<(), sqlx::Error> {
        let (retried, failed): (i64, i64) = sqlx::query_as(include_str!("../sql/retry_later.sql"))
            .bind(ids)
            .bind(self.config.max_attempts as i32)
            .bind(self.config.backoff_base.as_millis() as f64)
            .bind(self.config.backoff_max.as_millis() as f64)
            .bind(refused.detail)
            .bind(refused.permanent)
            .bind(refused.waiting)
            .fetch_one(&self.pool)
            .await?;
        metrics::failed(self.schema, D::NAME, failed as u64);
        metrics::retried(self.schema, D::NAME, retried as u64);
        Ok(())
    }

    /// The age of the oldest pending row, the number of failed ones and the number of pending
    /// ones (see the statement for its indexes).
    async fn backlog(&self) -> Result<(f64, i64, i64), sqlx::Error> {
        sqlx::query_as(include_str!("../sql/backlog.sql"))
            .bind(D::NAME)
            .fetch_one(&self.pool)
            .await
    }

    /// Leases a batch of due rows (index `outbox_due` to pick them, the primary key to move them:
    /// an `IN (subquery)` here would hash-join a scan of the whole table), oldest first.
    async fn claim(&self) -> Result<Vec<frame::StoredRow>, sqlx::Error> {
        let mut batch: Vec<frame::StoredRow> = sqlx::query_as(include_str!("../sql/claim.sql"))
            .bind(D::NAME)
            .bind(self.config.batch_size as i64)
            .bind(self.config.lease.as_millis() as i64)
            .fetch_all(&self.pool)
            .await?;
        // RETURNING has no order; deliver in the order the rows were written.
        batch.sort_by_key(|m| m.id);
        Ok(batch)
    }
}

/// How often a relay looks at its backlog.
const BACKLOG_EVERY: Duration = Duration::from_secs(5);
/// A pending row older than this is worth a warning: its destination has been failing a while.
const BACKLOG_WARN_AGE_SECS: f64 = 60.0;

/// A relay's view of its backlog, published as metrics, and warned about once per episode
/// rather than on every look.
#[derive(Default)]
struct Backlog {
    last_look: Option<tokio::time::Instant>,
    warned: bool,
}

impl Backlog {
    async fn watch<D: Destination>(&mut self, relay: &Relay<D>) {
        if self
            .last_look
            .is_some_and(|at| at.elapsed() < BACKLOG_EVERY)
        {
            return;
        }
        self.last_look = Some(tokio::time::Instant::now());
        let Ok((oldest, failed, pending)) = relay.backlog().await else {
            return;
        };
        metrics::backlog(relay.schema, D::NAME, oldest, failed, pending);
        let late = oldest >= BACKLOG_WARN_AGE_SECS;
        if late && !self.warned {
            tracing::warn!(
                schema = relay.schema,
                destination = D::NAME,
                oldest_pending_secs = oldest,
                "outbox rows are waiting longer than they should: the destination keeps failing"
            );
        } else if !late && self.warned {
            tracing::info!(
                schema = relay.schema,
                destination = D::NAME,
                "the outbox backlog has cleared"
            );
        }
        self.warned = late;
    }
}
