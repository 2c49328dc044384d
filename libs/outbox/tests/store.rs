//! The outbox and inbox tables against their own migrated schema: enqueue and framing, the
//! relay's claim, delivery, retry and failure, acks, the receiver's deduplication and the
//! inbox's pruning.

use std::{sync::Mutex, time::Duration};

use oxigram_outbox::{
    Destination, NewRow, Outbox, OutboxMessage, Refused, RelayConfig, first_deliveries, prune_inbox,
};
use oxigram_testkit::store::{self, Migrated};
use uuid::Uuid;

/// The schema these tests migrate the outbox into (any service's would do).
const SCHEMA: &str = "outbox_test";
/// The destination the relay tests deliver to.
const TO_A: &str = "a";

/// Settings that make a row due at once and back off for a minute.
fn config(max_attempts: u32) -> RelayConfig {
    RelayConfig::from_millis(100, 60_000, 100, max_attempts, 60_000, 60_000, 0)
}

async fn outbox(config: RelayConfig) -> anyhow::Result<(Migrated, Outbox)> {
    let db = store::migrated(SCHEMA, &[&oxigram_outbox::MIGRATOR]).await?;
    let outbox = Outbox::new(db.pool.clone(), SCHEMA, config);
    Ok((db, outbox))
}

fn row(destination: &'static str, event: Uuid, payload: &[u8]) -> NewRow {
    NewRow::new(destination, event, payload.to_vec())
}

/// Writes `rows` in a transaction of their own; returns each event's row id.
async fn enqueue(db: &Migrated, outbox: &Outbox, rows: &[NewRow]) -> anyhow::Result<Vec<i64>> {
    let mut tx = db.pool.begin().await?;
    let ids = outbox.enqueue(&mut tx, rows).await?;
    tx.commit().await?;
    Ok(ids)
}

/// (id, status, attempts, items, last error) of every outbox row, by id.
async fn rows(db: &Migrated) -> anyhow::Result<Vec<(i64, i16, i32, i32, Option<String>)>> {
    Ok(
        sqlx::query_as("SELECT id, status, attempts, items, last_error FROM outbox ORDER BY id")
            .fetch_all(&db.pool)
            .await?,
    )
}

/// What destination `a` does with a batch.
enum Answer {
    Take,
    Transient,
    Permanent,
    Waiting,
}

/// One delivered event: its id and payload.
type Delivered = (Uuid, Vec<u8>);

struct DestinationA {
    answer: Answer,
    /// Each call's events.
    got: Mutex<Vec<Vec<Delivered>>>,
}

impl DestinationA {
    fn new(answer: Answer) -> Self {
        Self {
            answer,
            got: Mutex::new(Vec::new()),
        }
    }

    fn calls(&self) -> Vec<Vec<Delivered>> {
        self.got.lock().map(|got| got.clone()).unwrap_or_default()
    }
}

impl Destination for DestinationA {
    const NAME: &'static str = TO_A;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        if let Ok(mut got) = self.got.lock() {
            got.push(
                batch
                    .iter()
                    .map(|m| (m.event_id, m.payload.clone()))
                    .collect(),
            );
        }
        match self.answer {
            Answer::Take => Ok(()),
            Answer::Transient => Err(Refused::transient("a is down")),
            Answer::Permanent => Err(Refused::permanent("a cannot read it")),
            Answer::Waiting => Err(Refused::waiting("a waits for earlier events")),
        }
    }
}

#[tokio::test]
async fn events_of_one_destination_share_a_row_and_duplicates_are_written_once()
-> anyhow::Result<()> {
    let (db, outbox) = outbox(config(5)).await?;
    let [e1, e2, e3, e4] = [
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
    ];
    let ids = enqueue(
        &db,
        &outbox,
        &[
            row(TO_A, e1, b"1"),
            row("b", e2, b"2"),
            row(TO_A, e3, b"3"),
            row(TO_A, e1, b"1"),
            row(TO_A, e4, b"4"),
        ],
    )
    .await?;
    assert_eq!(ids.len(), 5);
    let (a, b) = (ids[0], ids[1]);
    assert_ne!(a, b);
    assert_eq!(ids, vec![a, b, a, a, a]);
    let stored = rows(&db).await?;
    let items: Vec<(i64, i32)> = stored.iter().map(|r| (r.0, r.3)).collect();
    let mut expected = vec![(a, 3), (b, 1)];
    expected.sort_unstable();
    assert_eq!(items, expected);
    // Nothing to write, nothing written.
    assert!(enqueue(&db, &outbox, &[]).await?.is_empty());
    assert_eq!(rows(&db).await?.len(), 2);
    Ok(())
}

#[tokio::test]
async fn the_relay_delivers_due_rows_in_order_and_deletes_them() -> anyhow::Result<()> {
    let (db, outbox) = outbox(config(5)).await?;
    assert_eq!(outbox.newest_pending(TO_A).await?, None);
    let events: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let first = enqueue(
        &db,
        &outbox,
        &[row(TO_A, events[0], b"x"), row(TO_A, events[1], b"y")],
    )
    .await?;
    let second = enqueue(
        &db,
        &outbox,
        &[row(TO_A, events[2], b"z"), row("b", events[2], b"z")],
    )
    .await?;
    assert_eq!(outbox.newest_pending(TO_A).await?, Some(second[0]));
    assert_eq!(outbox.newest_pending("b").await?, Some(second[1]));
    assert!(!outbox.delivered_through(TO_A, first[0]).await?);

    let relay = outbox.relay(DestinationA::new(Answer::Take));
    assert_eq!(relay.round().await?, 2);
    assert_eq!(relay.round().await?, 0);
    // Row `b` is another destination's.
    let left: Vec<i64> = rows(&db).await?.iter().map(|r| r.0).collect();
    assert_eq!(left, vec![second[1]]);
    assert!(outbox.delivered_through(TO_A, second[0]).await?);
    assert_eq!(outbox.newest_pending(TO_A).await?, None);
    Ok(())
}

#[tokio::test]
async fn the_relay_passes_every_event_once_in_the_order_written() -> anyhow::Result<()> {
    let (db, outbox) = outbox(config(5)).await?;
    let events: Vec<Uuid> = (0..4).map(|_| Uuid::new_v4()).collect();
    enqueue(
        &db,
        &outbox,
        &[row(TO_A, events[0], b"0"), row(TO_A, events[1], b"1")],
    )
    .await?;
    enqueue(
        &db,
        &outbox,
        &[row(TO_A, events[2], b"2"), row(TO_A, events[3], b"3")],
    )
    .await?;
    let destination = std::sync::Arc::new(DestinationA::new(Answer::Take));
    let relay = outbox.relay(destination.clone());
    relay.round().await?;
    let delivered: Vec<Delivered> = destination.calls().concat();
    let expected: Vec<Delivered> = events
        .iter()
        .zip(["0", "1", "2", "3"])
        .map(|(e, p)| (*e, p.as_bytes().to_vec()))
        .collect();
    assert_eq!(delivered, expected);
    Ok(())
}

#[tokio::test]
async fn refused_rows_back_off_and_only_permanent_refusals_fail() -> anyhow::Result<()> {
    // (answer, max attempts, rounds) -> (status, attempts): 0 pending, 2 failed.
    let cases = [
        ((Answer::Transient, 1, 1), (0, 1)),
        ((Answer::Transient, 1, 3), (0, 3)),
        ((Answer::Permanent, 3, 1), (0, 1)),
        ((Answer::Permanent, 3, 3), (2, 3)),
        ((Answer::Permanent, 1, 1), (2, 1)),
    ];
    for ((answer, max_attempts, rounds), (status, attempts)) in cases {
        // Rows come due again at once, so each round claims them anew.
        let retry_now = RelayConfig::from_millis(100, 0, 100, max_attempts, 0, 0, 0);
        let (db, outbox) = outbox(retry_now).await?;
        enqueue(&db, &outbox, &[row(TO_A, Uuid::new_v4(), b"p")]).await?;
        let relay = outbox.relay(DestinationA::new(answer));
        for _ in 0..rounds {
            assert_eq!(relay.round().await?, 1);
        }
        let stored = rows(&db).await?;
        assert_eq!(stored.len(), 1);
        let (_, got_status, got_attempts, _, error) = &stored[0];
        assert_eq!((*got_status, *got_attempts), (status, attempts));
        assert!(
            error.as_deref().is_some_and(|e| e.starts_with("a ")),
            "{error:?}"
        );
    }
    // A transient refusal backs off: the row is not due again at once.
    let (db, outbox) = outbox(config(1)).await?;
    enqueue(&db, &outbox, &[row(TO_A, Uuid::new_v4(), b"p")]).await?;
    let relay = outbox.relay(DestinationA::new(Answer::Transient));
    assert_eq!(relay.round().await?, 1);
    assert_eq!(relay.round().await?, 0);
    assert_eq!(rows(&db).await?[0].1, 0);
    Ok(())
}

/// A destination that takes `delay` to answer (forever: `None`), counting its calls.
struct Slow {
    delay: Option<Duration>,
    calls: std::sync::atomic::AtomicUsize,
}

impl Destination for Slow {
    const NAME: &'static str = TO_A;

    async fn deliver(&self, _batch: &[OutboxMessage]) -> Result<(), Refused> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.delay {
            Some(delay) => tokio::time::sleep(delay).await,
            None => std::future::pending().await,
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_lease_is_renewed_while_delivering_and_runs_out_when_the_relay_stops()
-> anyhow::Result<()> {
    // A 300 ms lease; the delivery takes four of them.
    let short_lease = RelayConfig::from_millis(100, 300, 100, 5, 0, 0, 0);
    let (db, first) = outbox(short_lease.clone()).await?;
    enqueue(&db, &first, &[row(TO_A, Uuid::new_v4(), b"p")]).await?;
    let slow = std::sync::Arc::new(Slow {
        delay: Some(Duration::from_millis(1_200)),
        calls: 0.into(),
    });
    let delivering = {
        let relay = first.relay(slow.clone());
        tokio::spawn(async move { relay.round().await })
    };
    // Past the first lease, a second relay finds the row still leased: renewed.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let other = first.relay(DestinationA::new(Answer::Take));
    assert_eq!(other.round().await?, 0, "a renewed lease hid the row");
    assert_eq!(delivering.await??, 1);
    assert!(rows(&db).await?.is_empty(), "delivered once and deleted");
    assert_eq!(slow.calls.load(std::sync::atomic::Ordering::Relaxed), 1);

    // A relay that stops mid-delivery (its process killed) renews nothing: its row comes due
    // again within one lease and another relay delivers it.
    let (db, second) = outbox(short_lease).await?;
    enqueue(&db, &second, &[row(TO_A, Uuid::new_v4(), b"q")]).await?;
    let stuck = {
        let relay = second.relay(Slow {
            delay: None,
            calls: 0.into(),
        });
        tokio::spawn(async move { relay.round().await })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    stuck.abort();
    let other = second.relay(DestinationA::new(Answer::Take));
    assert_eq!(other.round().await?, 0, "still leased right after the stop");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        other.round().await?,
        1,
        "due again one lease after the stop"
    );
    assert!(rows(&db).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn rows_waiting_on_earlier_ones_come_back_after_the_base_delay() -> anyhow::Result<()> {
    // Base 100 ms, cap a minute; after four refusals in a row a transient row waits
    // 100 ms * 2^3 (give or take a fifth), a waiting one the base alone, and neither fails.
    // (answer) -> (least, most) delay in ms
    let cases = [
        (Answer::Transient, (600, 1_000)),
        (Answer::Waiting, (70, 130)),
    ];
    for (answer, (least, most)) in cases {
        let config = RelayConfig::from_millis(100, 60_000, 100, 2, 100, 60_000, 0);
        let (db, outbox) = outbox(config).await?;
        enqueue(&db, &outbox, &[row(TO_A, Uuid::new_v4(), b"p")]).await?;
        let relay = outbox.relay(DestinationA::new(answer));
        for _ in 0..4 {
            sqlx::query("UPDATE outbox SET available_at = now()")
                .execute(&db.pool)
                .await?;
            assert_eq!(relay.round().await?, 1);
        }
        let (status, delay_ms): (i16, f64) = sqlx::query_as(
            "SELECT status, (extract(epoch FROM available_at - now()) * 1000)::float8 FROM outbox",
        )
        .fetch_one(&db.pool)
        .await?;
        assert_eq!(status, 0, "retried, never failed");
        assert!(
            (least as f64..=most as f64).contains(&delay_ms),
            "due again in {delay_ms:.0} ms, not {least}..{most}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_failed_row_is_never_claimed_again() -> anyhow::Result<()> {
    let retry_now = RelayConfig::from_millis(100, 0, 100, 1, 0, 0, 0);
    let (db, outbox) = outbox(retry_now).await?;
    enqueue(&db, &outbox, &[row(TO_A, Uuid::new_v4(), b"p")]).await?;
    let relay = outbox.relay(DestinationA::new(Answer::Permanent));
    assert_eq!(relay.round().await?, 1);
    assert_eq!(relay.round().await?, 0);
    assert_eq!(outbox.newest_pending(TO_A).await?, None);
    assert_eq!(rows(&db).await?[0].1, 2);
    Ok(())
}

#[tokio::test]
async fn acknowledged_rows_are_deleted() -> anyhow::Result<()> {
    let (db, outbox) = outbox(config(5)).await?;
    let ids = enqueue(
        &db,
        &outbox,
        &[
            row(TO_A, Uuid::new_v4(), b"p"),
            row("b", Uuid::new_v4(), b"q"),
        ],
    )
    .await?;
    outbox.ack(TO_A, vec![ids[0]]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<i64> = rows(&db).await?.iter().map(|r| r.0).collect();
        if left == vec![ids[1]] {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "rows left: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

#[tokio::test]
async fn the_inbox_passes_each_event_once_and_forgets_old_ones() -> anyhow::Result<()> {
    let (db, _outbox) = outbox(config(5)).await?;
    let [e1, e2, e3] = [Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4()];
    // (event ids received) -> those received for the first time
    let deliveries = [
        (vec![e1, e2], vec![e1, e2]),
        (vec![e2, e3], vec![e3]),
        (vec![e1, e2, e3], vec![]),
        (vec![], vec![]),
    ];
    for (received, first) in deliveries {
        let mut tx = db.pool.begin().await?;
        let mut got = first_deliveries(&mut tx, &received).await?;
        tx.commit().await?;
        let mut expected = first.clone();
        got.sort_unstable();
        expected.sort_unstable();
        assert_eq!(got, expected, "{received:?}");
    }
    sqlx::query("UPDATE inbox SET received_at = now() - interval '2 hours' WHERE event_id <> $1")
        .bind(e3)
        .execute(&db.pool)
        .await?;
    assert_eq!(prune_inbox(&db.pool, Duration::from_secs(3600)).await?, 2);
    assert_eq!(prune_inbox(&db.pool, Duration::from_secs(3600)).await?, 0);
    let kept: Vec<Uuid> = sqlx::query_scalar("SELECT event_id FROM inbox")
        .fetch_all(&db.pool)
        .await?;
    assert_eq!(kept, vec![e3]);
    // Forgotten ids count as new again.
    let mut tx = db.pool.begin().await?;
    assert_eq!(first_deliveries(&mut tx, &[e1]).await?, vec![e1]);
    tx.commit().await?;
    Ok(())
}
