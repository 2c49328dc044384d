//! The relay's terminal-failure path against a migrated schema: a row its destination refuses
//! as malformed is kept as failed after `max_attempts`, is never handed on as delivered, does
//! not hold back the rows around it, not even those that share its round, and shows in the
//! outbox metrics.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use oxigram_outbox::{Destination, NewRow, Outbox, OutboxMessage, Refused, RelayConfig};
use oxigram_testkit::store::{self, Migrated};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const SCHEMA: &str = "outbox_terminal_test";
/// A destination name of its own, so the metrics read here are this test's alone.
const POISONED: &str = "poisoned";
/// The payload the destination can never read.
const POISON: &[u8] = b"poison";
const MAX_ATTEMPTS: u32 = 3;
/// The most events one outbox row holds: two such rows make one full call.
const ROW_EVENTS: usize = oxigram_outbox::MAX_CALL / 2;

/// Refuses every call that carries the poison payload, as malformed; takes the others.
#[derive(Default)]
struct Picky {
    /// Each call's events and whether it was taken.
    calls: Mutex<Vec<(Vec<Uuid>, bool)>>,
}

impl Picky {
    fn calls(&self) -> Vec<(Vec<Uuid>, bool)> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// How many times `event` was taken, and how many times refused.
    fn outcomes(&self, event: Uuid) -> (usize, usize) {
        let calls = self.calls();
        let with = |taken: bool| {
            calls
                .iter()
                .filter(|(events, t)| *t == taken && events.contains(&event))
                .count()
        };
        (with(true), with(false))
    }
}

impl Destination for Picky {
    const NAME: &'static str = POISONED;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        self.take(batch)
    }
}

/// The same destination under another name, so the rounds of several calls have metrics and
/// rows of their own.
#[derive(Default)]
struct Crowded(Picky);

impl Destination for Crowded {
    const NAME: &'static str = "poisoned_crowded";

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        self.0.take(batch)
    }
}

impl Picky {
    fn take(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        let poisoned = batch.iter().any(|m| m.payload == POISON);
        if let Ok(mut calls) = self.calls.lock() {
            calls.push((batch.iter().map(|m| m.event_id).collect(), !poisoned));
        }
        if poisoned {
            Err(Refused::permanent("poisoned cannot read it"))
        } else {
            Ok(())
        }
    }
}

async fn enqueue(
    db: &Migrated,
    outbox: &Outbox,
    event: Uuid,
    payload: &[u8],
) -> anyhow::Result<()> {
    let mut tx = db.pool.begin().await?;
    outbox
        .enqueue(&mut tx, &[NewRow::new(POISONED, event, payload.to_vec())])
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Writes one full row (the most events a row holds) of `payload` for `Crowded`; returns its
/// events.
async fn enqueue_row(db: &Migrated, outbox: &Outbox, payload: &[u8]) -> anyhow::Result<Vec<Uuid>> {
    let events: Vec<Uuid> = (0..ROW_EVENTS).map(|_| Uuid::new_v4()).collect();
    let rows: Vec<NewRow> = events
        .iter()
        .map(|&e| NewRow::new(Crowded::NAME, e, payload.to_vec()))
        .collect();
    let mut tx = db.pool.begin().await?;
    let ids = outbox.enqueue(&mut tx, &rows).await?;
    tx.commit().await?;
    anyhow::ensure!(
        ids.iter().all(|&id| id == ids[0]),
        "the events span several rows"
    );
    Ok(events)
}

/// The value of a metric line of this test's destination, if the registry has one.
fn metric(name: &str) -> Option<f64> {
    let prefix = format!("oxigram_{name}{{");
    oxigram_telemetry::metrics::render()
        .lines()
        .filter(|l| l.starts_with(&prefix) && l.contains(&format!("destination=\"{POISONED}\"")))
        .find_map(|l| l.rsplit(' ').next().and_then(|v| v.parse().ok()))
}

#[tokio::test]
async fn a_permanently_refused_row_fails_once_out_of_attempts_and_the_rest_keep_flowing()
-> anyhow::Result<()> {
    // One row per round, due again at once after a refusal: the refused row goes to the back
    // of the queue (by available_at), so the rows written after it are claimed in between.
    let config = RelayConfig::from_millis(1, 60_000, 50, MAX_ATTEMPTS, 0, 0, 0);
    let db = store::migrated(SCHEMA, &[&oxigram_outbox::MIGRATOR]).await?;
    let outbox = Outbox::new(db.pool.clone(), SCHEMA, config);
    let bad = Uuid::new_v4();
    let good: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    enqueue(&db, &outbox, bad, POISON).await?;
    for &event in &good {
        enqueue(&db, &outbox, event, b"fine").await?;
    }
    let picky = Arc::new(Picky::default());
    let relay = outbox.relay(picky.clone());
    let mut rounds = 0;
    while relay.round().await? > 0 {
        rounds += 1;
        anyhow::ensure!(rounds < 50, "the relay never ran dry");
    }
    // The poisoned row was offered max_attempts times, refused each time, then kept failed.
    let stored: Vec<(Uuid, i16, i32, Option<String>)> =
        sqlx::query_as("SELECT event_id, status, attempts, last_error FROM outbox ORDER BY id")
            .fetch_all(&db.pool)
            .await?;
    assert_eq!(stored.len(), 1, "{stored:?}");
    let (event, status, attempts, error) = &stored[0];
    assert_eq!((*event, *status, *attempts), (bad, 2, MAX_ATTEMPTS as i32));
    assert_eq!(error.as_deref(), Some("poisoned cannot read it"));
    assert_eq!(picky.outcomes(bad), (0, MAX_ATTEMPTS as usize));
    // Every other row was delivered exactly once, none refused along with it.
    for &event in &good {
        assert_eq!(picky.outcomes(event), (1, 0), "{event}");
    }
    assert_eq!(rounds, MAX_ATTEMPTS as usize + good.len());
    // A failed row is never claimed again; rows written later still flow.
    let later = Uuid::new_v4();
    enqueue(&db, &outbox, later, b"fine").await?;
    assert_eq!(relay.round().await?, 1);
    assert_eq!(relay.round().await?, 0);
    assert_eq!(picky.outcomes(later), (1, 0));
    assert_eq!(picky.outcomes(bad), (0, MAX_ATTEMPTS as usize));
    assert_eq!(outbox.newest_pending(POISONED).await?, None);

    // The terminal failure is counted, and a running relay publishes the failed row.
    assert_eq!(metric("outbox_failed_total"), Some(1.0));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(outbox.relay(Picky::default()).run(shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    shutdown.cancel();
    running.await?;
    assert_eq!(metric("outbox_failed_rows"), Some(1.0));
    assert_eq!(metric("outbox_pending_rows"), Some(0.0));
    Ok(())
}

#[tokio::test]
async fn good_rows_sharing_a_round_with_a_refused_call_are_delivered_once_never_failed()
-> anyhow::Result<()> {
    // Every row claimed in each round, due again at once: each round offers three calls, the
    // good rows written before the poisoned ones, the poisoned rows, and the good rows
    // written after them.
    let config = RelayConfig::from_millis(100, 60_000, 50, MAX_ATTEMPTS, 0, 0, 0);
    let db = store::migrated("outbox_crowded_test", &[&oxigram_outbox::MIGRATOR]).await?;
    let outbox = Outbox::new(db.pool.clone(), "outbox_crowded_test", config);
    let mut before = enqueue_row(&db, &outbox, b"fine").await?;
    before.extend(enqueue_row(&db, &outbox, b"fine").await?);
    let mut bad = enqueue_row(&db, &outbox, POISON).await?;
    bad.extend(enqueue_row(&db, &outbox, POISON).await?);
    let mut after = enqueue_row(&db, &outbox, b"fine").await?;
    after.extend(enqueue_row(&db, &outbox, b"fine").await?);
    let crowded = Arc::new(Crowded::default());
    let relay = outbox.relay(crowded.clone());
    let mut rounds = 0;
    while relay.round().await? > 0 {
        rounds += 1;
        anyhow::ensure!(rounds < 50, "the relay never ran dry");
    }

    // How many times each event was taken and refused.
    let mut outcomes: HashMap<Uuid, (usize, usize)> = HashMap::new();
    let calls = crowded.0.calls();
    for (events, taken) in &calls {
        for event in events {
            let counts = outcomes.entry(*event).or_default();
            if *taken {
                counts.0 += 1;
            } else {
                counts.1 += 1;
            }
        }
    }
    for event in before.iter().chain(&after) {
        assert_eq!(outcomes.get(event), Some(&(1, 0)), "{event}");
    }
    for event in &bad {
        assert_eq!(
            outcomes.get(event),
            Some(&(0, MAX_ATTEMPTS as usize)),
            "{event}"
        );
    }
    // Only the poisoned rows are left, kept failed; the rows after them were never marked
    // failed on their account.
    let stored: Vec<(i16, i32, i64)> =
        sqlx::query_as("SELECT status, attempts, count(*) FROM outbox GROUP BY 1, 2")
            .fetch_all(&db.pool)
            .await?;
    assert_eq!(stored, vec![(2, MAX_ATTEMPTS as i32, 2)]);
    // The good rows after the poisoned ones waited for them to fail, then went in one more
    // round.
    assert_eq!(rounds, MAX_ATTEMPTS as usize + 1);
    Ok(())
}
