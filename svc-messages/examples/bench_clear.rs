//! The clear benchmark: one user's dialog of many messages is cleared with DeleteHistory's
//! batches (revoking, so both owners' boxes go) while other users keep sending, through the
//! store's own send and delete transactions. Prints the senders' latency (p50/p99) without the
//! clear and during it, side by side, and how long the clear took.
//!
//! `OXIGRAM_TEST_INFRA=local cargo run --release -p svc-messages --example bench_clear -- \
//!     [--messages 50000] [--senders 4] [--baseline-secs 10]`

mod common;

use common::{flag, percentile};

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicI64, Ordering},
    },
    time::{Duration, Instant},
};

use oxigram_outbox::{Outbox, RelayConfig};
use oxigram_proto::types::v1::{InputPeer, SendMessageRequest};
use oxigram_testkit::store::Migrated;
use sqlx::PgPool;
use svc_messages::{
    delete::{self, Delete, DeleteOutcome, Targets},
    send::{self, NewMessage},
};

/// The owner of the dialog cleared, and her peer.
const OWNER: i64 = 1;
const PEER: i64 = 2;
/// The senders are users 1001, 1002, …; each sends to the next one.
const FIRST_SENDER: i64 = 1001;

fn message(sender: i64, peer: i64, random_id: i64, text: String) -> NewMessage {
    NewMessage {
        sender_id: sender,
        peer_id: peer,
        auth_key_id: 7,
        request_hash: format!("{peer}/{text}").into_bytes(),
        request: SendMessageRequest {
            peer: Some(InputPeer::user(peer)),
            random_id,
            text,
            ..Default::default()
        },
        fwd_from: None,
        traceparent: None,
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    common::on_fresh_database(|db| async move { measure(&db).await }).await
}

/// Senders, each sending one message per transaction to the next sender until `stop`;
/// returns every send's latency.
async fn send_until(
    pool: &PgPool,
    outbox: &Outbox,
    senders: usize,
    next_key: &Arc<AtomicI64>,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<Vec<Duration>> {
    let mut tasks = Vec::new();
    for s in 0..senders as i64 {
        let (pool, outbox) = (pool.clone(), outbox.clone());
        let (next_key, stop) = (next_key.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let sender = FIRST_SENDER + s;
            let peer = FIRST_SENDER + (s + 1) % senders as i64;
            while !stop.load(Ordering::Relaxed) {
                let key = next_key.fetch_add(1, Ordering::Relaxed);
                let m = message(sender, peer, key, format!("load {key}"));
                let t = Instant::now();
                send::send(&pool, &outbox, &[m]).await?;
                times.push(t.elapsed());
            }
            anyhow::Ok(times)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await??);
    }
    all.sort_unstable();
    Ok(all)
}

fn show(name: &str, times: &[Duration], secs: f64) -> String {
    format!(
        "{name:<18} {:>6} sends ({:>6.0}/s): p50 {:>8.2?}  p99 {:>8.2?}  max {:>8.2?}",
        times.len(),
        times.len() as f64 / secs,
        percentile(times, 0.50),
        percentile(times, 0.99),
        percentile(times, 1.0)
    )
}

async fn measure(db: &Migrated) -> anyhow::Result<()> {
    let messages = flag("--messages", 50_000)? as i64;
    let senders = flag("--senders", 4)?;
    let baseline = Duration::from_secs(flag("--baseline-secs", 10)? as u64);
    let outbox = Outbox::new(
        db.pool.clone(),
        svc_messages::SCHEMA,
        RelayConfig::default(),
    );

    // The dialog to clear, both ways, sent in batches as the group commit would.
    let started = Instant::now();
    let all: Vec<NewMessage> = (1..=messages)
        .map(|n| {
            let (from, to) = if n % 2 == 0 {
                (OWNER, PEER)
            } else {
                (PEER, OWNER)
            };
            message(from, to, n, format!("message {n}"))
        })
        .collect();
    for chunk in all.chunks(500) {
        send::send(&db.pool, &outbox, chunk).await?;
    }
    sqlx::query("ANALYZE").execute(&db.pool).await?;
    println!(
        "filled: a dialog of {messages} messages in {:.1?}; {senders} senders",
        started.elapsed()
    );

    let next_key = Arc::new(AtomicI64::new(1));
    // Warm up the senders' own rows and the pool.
    let stop = Arc::new(AtomicBool::new(false));
    let warm = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            stop.store(true, Ordering::Relaxed);
        })
    };
    send_until(&db.pool, &outbox, senders, &next_key, &stop).await?;
    warm.await?;

    // Without the clear.
    let stop = Arc::new(AtomicBool::new(false));
    let timer = {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(baseline).await;
            stop.store(true, Ordering::Relaxed);
        })
    };
    let quiet = send_until(&db.pool, &outbox, senders, &next_key, &stop).await?;
    timer.await?;

    // During the clear: batches until nothing is left.
    let stop = Arc::new(AtomicBool::new(false));
    let clear = {
        let (pool, outbox, stop) = (db.pool.clone(), outbox.clone(), stop.clone());
        tokio::spawn(async move {
            let t = Instant::now();
            let mut batches = Vec::new();
            loop {
                let delete = Delete {
                    owner_id: OWNER,
                    auth_key_id: 7,
                    targets: Targets::History {
                        peer: PEER,
                        max_id: i64::MAX,
                        just_clear: false,
                    },
                    revoke: true,
                    traceparent: None,
                };
                let b = Instant::now();
                let more = match delete::delete(&pool, &outbox, &delete).await? {
                    DeleteOutcome::Deleted(d) => d.more,
                    DeleteOutcome::Forbidden => anyhow::bail!("forbidden"),
                };
                batches.push(b.elapsed());
                if !more {
                    break;
                }
            }
            stop.store(true, Ordering::Relaxed);
            batches.sort_unstable();
            anyhow::Ok((t.elapsed(), batches))
        })
    };
    let during_started = Instant::now();
    let during = send_until(&db.pool, &outbox, senders, &next_key, &stop).await?;
    let during_secs = during_started.elapsed().as_secs_f64();
    let (took, batches) = clear.await??;

    let left: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM message_boxes WHERE owner_id = ANY($1) AND NOT deleted",
    )
    .bind([OWNER, PEER])
    .fetch_one(&db.pool)
    .await?;
    println!(
        "clear: {} batches in {took:.1?} (batch p50 {:.2?}, p99 {:.2?}, max {:.2?}); {left} boxes left",
        batches.len(),
        percentile(&batches, 0.50),
        percentile(&batches, 0.99),
        percentile(&batches, 1.0)
    );
    println!(
        "{}",
        show("without the clear", &quiet, baseline.as_secs_f64())
    );
    println!("{}", show("during the clear", &during, during_secs));
    println!(
        "send p99 during / without: {:.2}",
        percentile(&during, 0.99).as_secs_f64() / percentile(&quiet, 0.99).as_secs_f64()
    );
    Ok(())
}
