//! The transactional outbox: every arrow between services that carries a fact.
//!
//! The producer writes its rows and its events in one local transaction ([`Outbox::enqueue`]);
//! the events of one destination share an outbox row (`frame`). Right after commit it hands
//! the events off itself and acks their rows (the fast path: its own call, or a [`FastPath`]
//! loop). A row still there after `fast_path_grace` is the [`Relay`]'s:
//! it claims due rows in batches (`FOR UPDATE SKIP LOCKED`), leases
//! them by moving `available_at` forward, delivers, and deletes what was delivered; failures are
//! retried with capped exponential backoff for as long as it takes, since every row carries a
//! fact already promised to a client. Only rows that can never be delivered (unreadable, or
//! refused as malformed: [`Refused::permanent`]) are kept as failed after `max_attempts`. The
//! receiver deduplicates by event id ([`first_deliveries`]), so a replay is harmless.

mod admin;
mod batch;
mod fast_path;
mod frame;
mod metrics;
mod relay;

use std::{collections::HashMap, sync::LazyLock, time::Duration};

use sqlx::{
    PgConnection, PgPool, Postgres,
    migrate::Migrator,
    postgres::{PgArguments, PgPoolOptions},
    query::QueryAs,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use admin::{AdminService, AdminToken, MAX_ADMIN_IDS};
pub use batch::next_batch;
use batch::next_batch_lingering;
pub use fast_path::FastPath;
pub use relay::{Destination, OutboxMessage, Refused, Relay, RelayConfig, decode_payloads};

/// Most events one delivery carries, the relay's and the fast path's alike: every receiver
/// takes this many in one call (svc-updates, svc-dialogs and svc-dispatch assert it; a
/// gateway's push takes any number).
pub const MAX_CALL: usize = 1000;

/// The outbox and inbox tables, applied into each service's schema next to its own migrations.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// One event for one destination, with the trace it continues.
#[derive(Debug, Clone)]
pub struct NewRow {
    pub destination: &'static str,
    pub event_id: Uuid,
    pub payload: Vec<u8>,
    pub traceparent: Option<String>,
}

impl NewRow {
    /// A row that continues the current span's trace.
    pub fn new(destination: &'static str, event_id: Uuid, payload: Vec<u8>) -> Self {
        Self {
            destination,
            event_id,
            payload,
            traceparent: oxigram_telemetry::propagation::current_traceparent(),
        }
    }
}

/// The outbox of one service schema.
#[derive(Clone)]
pub struct Outbox {
    pool: PgPool,
    /// Where acknowledged rows are deleted ([`cleaner_pool`]).
    cleaner: PgPool,
    acks: mpsc::Sender<Vec<i64>>,
    schema: &'static str,
    config: RelayConfig,
}

impl Outbox {
    /// Must be called inside a Tokio runtime: it starts the task that deletes acknowledged rows.
    pub fn new(pool: PgPool, schema: &'static str, config: RelayConfig) -> Self {
        let (acks, rx) = mpsc::channel(ACK_QUEUE);
        let cleaner = cleaner_pool(&pool);
        // Connect now: the first ack must not wait for a connection, or its rows could outlive
        // their grace and be replayed by the relay.
        let warm = cleaner.clone();
        tokio::spawn(async move {
            if let Err(err) = warm.acquire().await {
                tracing::debug!(error = %err, "the outbox cleaner could not connect yet");
            }
        });
        tokio::spawn(delete_acked(cleaner.clone(), rx));
        Self {
            pool,
            cleaner,
            acks,
            schema,
            config,
        }
    }

    /// Writes events (for any destinations) inside the producer's transaction, in one
    /// statement; they are due for the relay after `fast_path_grace`. Returns the id of each
    /// event's row, in the order given: hand off all the events of a call together, since an
    /// ack removes a whole row.
    pub async fn enqueue<'a>(
        &self,
        tx: &mut PgConnection,
        rows: impl IntoIterator<Item = &'a NewRow>,
    ) -> Result<Vec<i64>, sqlx::Error> {
        static SQL: LazyLock<String> = LazyLock::new(|| Staged::statement("", 1));
        let staged = self.stage(rows);
        if staged.is_empty() {
            return Ok(vec![]);
        }
        let returned = staged
            .bind(sqlx::query_as(SQL.as_str()))
            .fetch_all(tx)
            .await?;
        staged.ids(returned)
    }

    /// Rows to write inside a statement of the producer's own (see [`Staged`]), so that the
    /// transaction's other writes and its outbox rows cost one round trip together. The
    /// events of one destination share a row ([`frame`]); an event given twice for the same
    /// destination is written once.
    pub fn stage<'a>(&self, rows: impl IntoIterator<Item = &'a NewRow>) -> Staged<'a> {
        // Each destination's distinct events, in the order first given.
        let mut by_destination: Vec<(&'static str, Vec<&'a NewRow>)> = Vec::new();
        // For each event given: (its destination's place above, its place in that list).
        let mut places = Vec::new();
        let mut seen: HashMap<(&'static str, Uuid), (usize, usize)> = HashMap::new();
        for r in rows {
            let place = *seen.entry((r.destination, r.event_id)).or_insert_with(|| {
                let d = match by_destination.iter().position(|(d, _)| *d == r.destination) {
                    Some(d) => d,
                    None => {
                        by_destination.push((r.destination, Vec::new()));
                        by_destination.len() - 1
                    }
                };
                by_destination[d].1.push(r);
                (d, by_destination[d].1.len() - 1)
            });
            places.push(place);
        }
        let mut staged = Staged {
            destinations: Vec::new(),
            event_ids: Vec::new(),
            payloads: Vec::new(),
            traceparents: Vec::new(),
            items: Vec::new(),
            item_rows: Vec::new(),
            grace_ms: self.config.fast_path_grace.as_millis() as i64,
        };
        // The first row of each destination's list.
        let mut first_row = Vec::with_capacity(by_destination.len());
        for (destination, events) in &by_destination {
            first_row.push(staged.destinations.len());
            for chunk in events.chunks(frame::MAX_ROW_ITEMS) {
                staged.destinations.push(destination);
                // A row is named after its first event: distinct within a statement.
                staged.event_ids.push(chunk[0].event_id);
                staged.traceparents.push(chunk[0].traceparent.as_deref());
                staged.payloads.push(frame::encode(chunk.iter().copied()));
                staged.items.push(chunk.len() as i32);
            }
        }
        staged.item_rows = places
            .into_iter()
            .map(|(d, at)| first_row[d] + at / frame::MAX_ROW_ITEMS)
            .collect();
        staged
    }

    /// The fast path delivered these rows. They are deleted in batches by a background task
    /// (their grace keeps the relay away meanwhile; a lost ack only means a harmless replay).
    /// `ids` are those [`Outbox::enqueue`] returned, one per event: every event of a row must
    /// have been delivered.
    pub fn ack(&self, destination: &'static str, mut ids: Vec<i64>) {
        metrics::delivered(self.schema, destination, "fast_path", ids.len() as u64);
        ids.sort_unstable();
        ids.dedup();
        if let Err(mpsc::error::TrySendError::Full(ids) | mpsc::error::TrySendError::Closed(ids)) =
            self.acks.try_send(ids)
        {
            // Too many waiting: this one deletes directly.
            let pool = self.cleaner.clone();
            tokio::spawn(async move { delete_rows(&pool, &ids).await });
        }
    }

    /// The newest row for `destination` still waiting for delivery, if any (index outbox_due).
    pub async fn newest_pending(&self, destination: &str) -> Result<Option<i64>, sqlx::Error> {
        sqlx::query_scalar("SELECT max(id) FROM outbox WHERE destination = $1 AND status = 0")
            .bind(destination)
            .fetch_one(&self.pool)
            .await
    }

    /// Whether every row for `destination` up to `id` has been delivered (index outbox_due;
    /// rows past `id` are later ones).
    pub async fn delivered_through(&self, destination: &str, id: i64) -> Result<bool, sqlx::Error> {
        let pending: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM outbox WHERE destination = $1 AND status = 0 AND id <= $2)",
        )
        .bind(destination)
        .bind(id)
        .fetch_one(&self.pool)
        .await?;
        Ok(!pending)
    }

    /// The relay for `destination`; run it with [`Relay::run`].
    pub fn relay<D: Destination>(&self, destination: D) -> Relay<D> {
        Relay::new(
            self.pool.clone(),
            self.schema,
            self.config.clone(),
            destination,
        )
    }
}

/// Outbox rows bound as columns, for a statement that writes them beside the producer's own
/// rows ([`Staged::statement`]): [`Staged::bind`] binds the rows after the statement's own
/// parameters, and [`Staged::ids`] gives back, for each event staged, the id of its row.
pub struct Staged<'a> {
    destinations: Vec<&'static str>,
    event_ids: Vec<Uuid>,
    payloads: Vec<Vec<u8>>,
    traceparents: Vec<Option<&'a str>>,
    /// Events per row.
    items: Vec<i32>,
    /// For each event staged, the row that holds it.
    item_rows: Vec<usize>,
    grace_ms: i64,
}

/// What a [`Staged::statement`] returns for each row: destination, event id, outbox id.
pub type StagedRow = (String, Uuid, i64);

impl Staged<'_> {
    /// One statement: the producer's own data-modifying `WITH` items (`ctes`, whose
    /// parameters end before `$first`), then the outbox rows, returning their ids.
    pub fn statement(ctes: &str, first: usize) -> String {
        let own = if ctes.is_empty() {
            String::new()
        } else {
            format!("{ctes}, ")
        };
        format!(
            "WITH {own}{} SELECT destination, event_id, id FROM outbox_rows",
            Self::cte(first)
        )
    }

    /// `outbox_rows AS (INSERT …)`, whose parameters are `$first` to `$first + 5`.
    fn cte(first: usize) -> String {
        let sql = include_str!("../sql/stage.sql");
        let body = sql
            .lines()
            .filter(|l| !l.starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        (1..=5)
            .rev()
            .fold(body, |sql, k| {
                sql.replace(&format!("${{n+{k}}}"), &format!("${}", first + k))
            })
            .replace("${n}", &format!("${first}"))
    }

    pub fn is_empty(&self) -> bool {
        self.event_ids.is_empty()
    }

    /// Binds the rows as the next six parameters of `query`.
    pub fn bind<'q>(
        &'q self,
        query: QueryAs<'q, Postgres, StagedRow, PgArguments>,
    ) -> QueryAs<'q, Postgres, StagedRow, PgArguments> {
        query
            .bind(&self.destinations)
            .bind(&self.event_ids)
            .bind(&self.payloads)
            .bind(&self.traceparents)
            .bind(&self.items)
            .bind(self.grace_ms)
    }

    /// The outbox id of each event staged, in the order the events were given.
    pub fn ids(&self, returned: Vec<StagedRow>) -> Result<Vec<i64>, sqlx::Error> {
        let by_key: HashMap<(String, Uuid), i64> = returned
            .into_iter()
            .map(|(destination, event_id, id)| ((destination, event_id), id))
            .collect();
        let row_ids = self
            .destinations
            .iter()
            .zip(&self.event_ids)
            .map(|(destination, event_id)| {
                by_key
                    .get(&((*destination).to_owned(), *event_id))
                    .copied()
                    .ok_or_else(|| {
                        sqlx::Error::Protocol(format!(
                            "the outbox returned no id for {destination} {event_id}"
                        ))
                    })
            })
            .collect::<Result<Vec<i64>, sqlx::Error>>()?;
        Ok(self.item_rows.iter().map(|&row| row_ids[row]).collect())
    }
}

/// Most inbox entries one prune deletes.
const PRUNE_BATCH: i64 = 10_000;

/// Forgets received event ids older than `keep` (index inbox_received); returns how many.
pub async fn prune_inbox(pool: &PgPool, keep: Duration) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query(include_str!("../sql/prune_inbox.sql"))
        .bind(keep.as_secs() as i64)
        .bind(PRUNE_BATCH)
        .execute(pool)
        .await?;
    Ok(deleted.rows_affected())
}

/// Prunes the inbox every `every` until `shutdown`.
pub async fn prune_inbox_forever(
    pool: PgPool,
    keep: Duration,
    every: Duration,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        // A full batch means more is due: go again at once.
        while let Ok(n) = prune_inbox(&pool, keep).await {
            if n < PRUNE_BATCH as u64 || shutdown.is_cancelled() {
                break;
            }
        }
    }
}

/// Acknowledged batches waiting for deletion.
const ACK_QUEUE: usize = 4096;
/// Most ids one delete takes.
const ACK_BATCH: usize = 2000;
/// How long a delete waits for more acks.
const ACK_LINGER: Duration = Duration::from_millis(25);

async fn delete_rows(pool: &PgPool, ids: &[i64]) {
    // Primary key of outbox.
    let deleted = sqlx::query("DELETE FROM outbox WHERE id = ANY($1)")
        .bind(ids)
        .execute(pool)
        .await;
    if let Err(err) = deleted {
        tracing::warn!(error = %err, rows = ids.len(), "could not delete acknowledged outbox rows; the relay will replay them");
    }
}

/// One connection of the service's pool for deleting acknowledged rows, whose commits need not
/// be durable: a delete lost in a crash only makes the relay replay rows their receivers have
/// (and deduplicate). So they commit without waiting for a WAL flush of their own
/// (`synchronous_commit`), and their statement keeps one plan: planned anew for every small
/// id list, as the default plan cache chose, the delete spent more time planning than running.
fn cleaner_pool(pool: &PgPool) -> PgPool {
    let options = (*pool.connect_options()).clone().options([
        ("synchronous_commit", "off"),
        ("plan_cache_mode", "force_generic_plan"),
    ]);
    PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy_with(options)
}

/// Deletes acknowledged rows. Nothing waits for a deletion (a row's grace keeps the relay
/// away), so each delete waits [`ACK_LINGER`] for the acks that follow and takes them all:
/// a few statements a second instead of one per hand-off.
async fn delete_acked(pool: PgPool, mut rx: mpsc::Receiver<Vec<i64>>) {
    while let Some(acks) = next_batch_lingering(&mut rx, ACK_BATCH, Vec::len, ACK_LINGER).await {
        delete_rows(&pool, &acks.concat()).await;
    }
}

/// Receiver side: records event ids in the inbox inside the receiver's transaction and
/// returns those received for the first time (the others are replays: skip them).
pub async fn first_deliveries(
    tx: &mut PgConnection,
    event_ids: &[Uuid],
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/first_deliveries.sql"))
        .bind(event_ids)
        .fetch_all(tx)
        .await
}

impl RelayConfig {
    /// Relay settings from the shared configuration's numbers (milliseconds).
    #[allow(clippy::too_many_arguments)]
    pub fn from_millis(
        batch_size: u32,
        lease_ms: u64,
        poll_ms: u64,
        max_attempts: u32,
        backoff_base_ms: u64,
        backoff_max_ms: u64,
        fast_path_grace_ms: u64,
    ) -> Self {
        Self {
            batch_size: batch_size.clamp(1, 10_000),
            lease: Duration::from_millis(lease_ms),
            poll: Duration::from_millis(poll_ms),
            max_attempts: max_attempts.max(1),
            backoff_base: Duration::from_millis(backoff_base_ms),
            backoff_max: Duration::from_millis(backoff_max_ms),
            fast_path_grace: Duration::from_millis(fast_path_grace_ms),
        }
    }
}
