//! Phase 6: the raw Postgres cost of the same work, one naive transaction per send.

use super::*;

pub(super) struct BaselineOutcome {
    pub(super) committed: u64,
    pub(super) failed: u64,
    pub(super) tx_per_s: f64,
    /// Sends/s of the send phase over `tx_per_s`.
    pub(super) ratio: Option<f64>,
}

const BASELINE_SCHEMA: &[&str] = &[
    "CREATE SCHEMA IF NOT EXISTS bench_baseline",
    "CREATE TABLE IF NOT EXISTS bench_baseline.messages (
        id BIGSERIAL PRIMARY KEY, sender BIGINT NOT NULL, peer BIGINT NOT NULL,
        random_id BIGINT NOT NULL, text TEXT NOT NULL, date TIMESTAMPTZ NOT NULL DEFAULT now(),
        UNIQUE (sender, random_id))",
    "CREATE TABLE IF NOT EXISTS bench_baseline.boxes (
        owner BIGINT NOT NULL, box_id BIGINT NOT NULL, message_id BIGINT NOT NULL,
        PRIMARY KEY (owner, box_id))",
    "CREATE TABLE IF NOT EXISTS bench_baseline.dialogs (
        owner BIGINT NOT NULL, peer BIGINT NOT NULL, top_id BIGINT NOT NULL,
        unread INT NOT NULL DEFAULT 0, PRIMARY KEY (owner, peer))",
    "CREATE TABLE IF NOT EXISTS bench_baseline.events (
        user_id BIGINT NOT NULL, pts INT NOT NULL, body BYTEA NOT NULL,
        PRIMARY KEY (user_id, pts))",
    "CREATE TABLE IF NOT EXISTS bench_baseline.outbox (
        id BIGSERIAL PRIMARY KEY, dest TEXT NOT NULL, payload BYTEA NOT NULL)",
    // The per-user counter row: next box id and next pts, taken under its row lock.
    "CREATE TABLE IF NOT EXISTS bench_baseline.counters (
        owner BIGINT PRIMARY KEY, box_id BIGINT NOT NULL DEFAULT 0, pts INT NOT NULL DEFAULT 0)",
    // Scratch data: every run starts empty, so runs compare and the schema stays small.
    "TRUNCATE bench_baseline.messages, bench_baseline.boxes, bench_baseline.dialogs,
        bench_baseline.events, bench_baseline.outbox, bench_baseline.counters RESTART IDENTITY",
    "INSERT INTO bench_baseline.counters (owner) SELECT generate_series(1, $1::bigint)",
];

/// Runs the baseline for as long as the send phase measured, at the same concurrency, and
/// compares: `ratio` is sends/s over baseline transactions/s.
pub(super) async fn baseline_phase(
    args: &BenchArgs,
    run: &str,
    sends_per_s: f64,
    out: &Out,
) -> anyhow::Result<BaselineOutcome> {
    let mut base =
        tokio::time::timeout(Duration::from_secs(args.duration + 60), baseline(args, run))
            .await
            .map_err(|_| anyhow!("baseline timed out"))??;
    if base.tx_per_s > 0.0 {
        base.ratio = Some(round3(sends_per_s / base.tx_per_s));
    }
    out.line(format!(
        "baseline: {} naive transactions in {}s at concurrency {} → {:.1} tx/s ({} failed); ratio sends/baseline {}",
        base.committed,
        args.duration,
        args.senders,
        base.tx_per_s,
        base.failed,
        base.ratio.map_or("n/a".into(), |r| format!("{r:.3}")),
    ));
    Ok(base)
}

async fn baseline(args: &BenchArgs, run: &str) -> anyhow::Result<BaselineOutcome> {
    let pool = PgPoolOptions::new()
        .max_connections(args.senders as u32)
        .acquire_timeout(RPC_DEADLINE)
        // No ping per acquire, as the services' own pools: the baseline is the bare work.
        .test_before_acquire(false)
        .connect(&args.database_url)
        .await
        .with_context(|| format!("cannot reach Postgres at {}", args.database_url))?;
    for statement in BASELINE_SCHEMA {
        let q = sqlx::query(*statement);
        let q = if statement.contains("$1") {
            q.bind(args.users as i64)
        } else {
            q
        };
        q.execute(&pool)
            .await
            .with_context(|| format!("preparing bench_baseline: {statement}"))?;
    }
    let committed = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let end = start + Duration::from_secs(args.duration);
    let workers: Vec<JoinHandle<()>> = (0..args.senders)
        .map(|_| {
            let (pool, committed, failed) = (pool.clone(), committed.clone(), failed.clone());
            let users = args.users as i64;
            let run = run.to_owned();
            tokio::spawn(async move {
                let mut seq = 0u64;
                while Instant::now() < end {
                    seq += 1;
                    let s = rand::random_range(1..=users);
                    let mut r = rand::random_range(1..users);
                    if r >= s {
                        r += 1;
                    }
                    let text = format!("baseline {run} #{seq}");
                    match tokio::time::timeout(RPC_DEADLINE, naive_send(&pool, s, r, &text)).await {
                        Ok(Ok(())) => {
                            committed.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await?;
    }
    let seconds = start.elapsed().as_secs_f64().max(args.duration as f64);
    pool.close().await;
    let committed = committed.load(Ordering::Relaxed);
    Ok(BaselineOutcome {
        committed,
        failed: failed.load(Ordering::Relaxed),
        tx_per_s: committed as f64 / seconds,
        ratio: None,
    })
}

/// One send as one naive transaction: the message, both boxes, both dialogs, both users'
/// events with their next pts, and two outbox rows.
async fn naive_send(pool: &PgPool, sender: i64, peer: i64, text: &str) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    let message_id: i64 = sqlx::query_scalar(
        "INSERT INTO bench_baseline.messages (sender, peer, random_id, text)
         VALUES ($1, $2, $3, $4) RETURNING id",
    )
    .bind(sender)
    .bind(peer)
    .bind(rand::random_range(1..i64::MAX))
    .bind(text)
    .fetch_one(&mut *tx)
    .await?;
    // Counter rows in id order, so two opposite sends never deadlock.
    let mut next = HashMap::new();
    for owner in [sender.min(peer), sender.max(peer)] {
        let row: (i64, i32) = sqlx::query_as(
            "UPDATE bench_baseline.counters SET box_id = box_id + 1, pts = pts + 1
             WHERE owner = $1 RETURNING box_id, pts",
        )
        .bind(owner)
        .fetch_one(&mut *tx)
        .await?;
        next.insert(owner, row);
    }
    let (sender_box, sender_pts) = *next.get(&sender).context("no counter row")?;
    let (peer_box, peer_pts) = *next.get(&peer).context("no counter row")?;
    for (owner, box_id) in [(sender, sender_box), (peer, peer_box)] {
        sqlx::query(
            "INSERT INTO bench_baseline.boxes (owner, box_id, message_id) VALUES ($1, $2, $3)",
        )
        .bind(owner)
        .bind(box_id)
        .bind(message_id)
        .execute(&mut *tx)
        .await?;
    }
    for (owner, other, top, unread) in [(sender, peer, sender_box, 0), (peer, sender, peer_box, 1)]
    {
        sqlx::query(
            "INSERT INTO bench_baseline.dialogs (owner, peer, top_id, unread) VALUES ($1, $2, $3, $4)
             ON CONFLICT (owner, peer) DO UPDATE
             SET top_id = EXCLUDED.top_id, unread = bench_baseline.dialogs.unread + EXCLUDED.unread",
        )
        .bind(owner)
        .bind(other)
        .bind(top)
        .bind(unread)
        .execute(&mut *tx)
        .await?;
    }
    let body = text.as_bytes();
    for (owner, pts) in [(sender, sender_pts), (peer, peer_pts)] {
        sqlx::query("INSERT INTO bench_baseline.events (user_id, pts, body) VALUES ($1, $2, $3)")
            .bind(owner)
            .bind(pts)
            .bind(body)
            .execute(&mut *tx)
            .await?;
    }
    for _ in 0..2 {
        sqlx::query("INSERT INTO bench_baseline.outbox (dest, payload) VALUES ('push', $1)")
            .bind(body)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}
