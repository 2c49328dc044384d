//! The search indexer: brings the word keys of message_words in step with the boxes queued in
//! search_queue (new, edited, or deleted), in batches, after the writes that queued them
//! committed. A send thus pays for a queue row per owner, not for a key per word; a search
//! reads its owner's queue too, so that it never misses a message the indexer has not reached
//! yet.

use std::{
    sync::{LazyLock, atomic::AtomicU64},
    time::Duration,
};

use oxigram_storage::{
    batch_row,
    unnest::{BatchRow, Statement},
};
use prometheus_client::metrics::gauge::Gauge;
use sqlx::PgPool;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::search_words::index_keys;

/// Queued boxes one indexer transaction takes at most.
pub const BATCH: i64 = 512;
/// How long an indexer with nothing to do waits before it looks at the queue again.
const IDLE_POLL: Duration = Duration::from_millis(200);
/// How long it waits after a failed batch (the batch stays queued).
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How often it publishes how far behind it is.
const LAG_EVERY: Duration = Duration::from_secs(5);

/// A claimed box, with its body's current text (sql/search_index_read.sql).
#[derive(sqlx::FromRow)]
struct QueuedBox {
    owner_id: i64,
    box_id: i64,
    peer_user_id: i64,
    deleted: bool,
    text: String,
}

batch_row! {
    /// A key of a live box.
    struct Added {
        owner_id: i64,
        word: String,
        box_id: i64,
        peer_user_id: i64,
    }
}

batch_row! {
    /// A key of a deleted box.
    struct Removed {
        owner_id: i64,
        word: String,
        box_id: i64,
    }
}

/// Indexes up to `max` queued boxes in one transaction: the keys of their body's current text
/// for a live box, none for a deleted one. Returns how many it took.
pub async fn index_queued(pool: &PgPool, max: i64) -> Result<usize, sqlx::Error> {
    static WRITE: LazyLock<String> = LazyLock::new(|| {
        Statement::new(include_str!("../sql/search_index_write.sql"))
            .rows::<Removed>("removed")
            .rows::<Added>("added")
            .into_sql()
    });
    let mut tx = pool.begin().await?;
    let claimed: Vec<(i64, i64)> = sqlx::query_as(include_str!("../sql/search_index_claim.sql"))
        .bind(max)
        .fetch_all(&mut *tx)
        .await?;
    if claimed.is_empty() {
        tx.commit().await?;
        return Ok(0);
    }
    let (owners, bodies): (Vec<i64>, Vec<i64>) = claimed.iter().copied().unzip();
    let boxes: Vec<QueuedBox> = sqlx::query_as(include_str!("../sql/search_index_read.sql"))
        .bind(&owners)
        .bind(&bodies)
        .fetch_all(&mut *tx)
        .await?;
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    for b in boxes {
        for word in index_keys(&b.text) {
            match b.deleted {
                true => removed.push(Removed {
                    owner_id: b.owner_id,
                    word,
                    box_id: b.box_id,
                }),
                false => added.push(Added {
                    owner_id: b.owner_id,
                    word,
                    box_id: b.box_id,
                    peer_user_id: b.peer_user_id,
                }),
            }
        }
    }
    // In key order, so that the index's pages are visited once each.
    added.sort_unstable_by(|a, b| {
        (a.owner_id, &a.word, a.box_id).cmp(&(b.owner_id, &b.word, b.box_id))
    });
    let query = sqlx::query_as::<_, (i32,)>(WRITE.as_str());
    Added::bind(&added, Removed::bind(&removed, query))
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(claimed.len())
}

/// The gauge of how long the oldest queued box has waited (0 when none): while it grows the
/// indexer falls behind, and searches read longer queues.
fn queue_age() -> &'static Gauge<f64, AtomicU64> {
    static AGE: LazyLock<Gauge<f64, AtomicU64>> = LazyLock::new(|| {
        let gauge = Gauge::default();
        oxigram_telemetry::metrics::register(
            "search_queue_oldest_seconds",
            "How long the oldest box queued for the search indexer has waited (0 when none)",
            gauge.clone(),
        );
        gauge
    });
    &AGE
}

async fn publish_lag(pool: &PgPool) {
    match sqlx::query_scalar(include_str!("../sql/search_queue_age.sql"))
        .fetch_one(pool)
        .await
    {
        Ok(age) => {
            queue_age().set(age);
        }
        Err(error) => tracing::warn!(%error, "search indexer: cannot read the queue's age"),
    }
}

/// Indexes queued boxes until `shutdown`: batch after batch while the queue is full, then
/// every [`IDLE_POLL`].
pub async fn run(pool: PgPool, shutdown: CancellationToken) {
    let mut lag_published = Instant::now() - LAG_EVERY;
    loop {
        if lag_published.elapsed() >= LAG_EVERY {
            publish_lag(&pool).await;
            lag_published = Instant::now();
        }
        let pause = match index_queued(&pool, BATCH).await {
            Ok(n) if n as i64 == BATCH => Duration::ZERO,
            Ok(_) => IDLE_POLL,
            Err(error) => {
                tracing::warn!(%error, "search indexer: a batch failed; it stays queued");
                RETRY_AFTER
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}
