//! Phase 5: dispatch draining a pre-filled backlog of push jobs.

use super::*;

pub(super) struct DrainOutcome {
    pub(super) accepted: u64,
    pub(super) enqueue_s: f64,
    pub(super) drain_s: f64,
    pub(super) jobs_per_s: f64,
    pub(super) complete: bool,
    pub(super) pending_before: i64,
    pub(super) failed_before: i64,
    pub(super) failed_after: i64,
}

/// (pending, failed) push jobs in dispatch's outbox (a row carries several).
async fn push_backlog(db: &PgPool) -> anyhow::Result<(i64, i64)> {
    let row: (i64, i64) = sqlx::query_as(
        "SELECT coalesce(sum(items) FILTER (WHERE status = 0), 0),
                coalesce(sum(items) FILTER (WHERE status <> 0), 0)
         FROM dispatch.outbox WHERE destination = 'push'",
    )
    .fetch_one(db)
    .await
    .context("reading dispatch.outbox")?;
    Ok(row)
}

/// Fills dispatch's backlog and measures how fast it drains (skipped with `--drain-jobs 0`).
pub(super) async fn drain(
    args: &BenchArgs,
    users: &[BenchUser],
    errors: &mut Errors,
    out: &Out,
) -> anyhow::Result<Option<DrainOutcome>> {
    if args.drain_jobs == 0 {
        return Ok(None);
    }
    let db = PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(RPC_DEADLINE)
        .connect(&args.database_url)
        .await
        .with_context(|| format!("cannot reach Postgres at {}", args.database_url))?;
    let outcome = tokio::time::timeout(
        DRAIN_CAP + Duration::from_secs(10),
        drain_phase(args, &db, users, errors),
    )
    .await;
    db.close().await;
    let d = outcome.map_err(|_| anyhow!("drain phase timed out"))??;
    out.line(format!(
        "drain: {} jobs enqueued in {:.1}s, backlog {} in {:.1}s → {:.0} jobs/s (pending before {}, failed rows {})",
        d.accepted,
        d.enqueue_s,
        if d.complete { "empty" } else { "NOT empty" },
        d.drain_s,
        d.jobs_per_s,
        d.pending_before,
        d.failed_after - d.failed_before,
    ));
    Ok(Some(d))
}

async fn drain_phase(
    args: &BenchArgs,
    db: &PgPool,
    users: &[BenchUser],
    errors: &mut Errors,
) -> anyhow::Result<DrainOutcome> {
    let (pending_before, failed_before) = push_backlog(db).await?;
    let channel = Endpoint::from_shared(args.dispatch.clone())?
        .connect_timeout(RPC_DEADLINE)
        .connect()
        .await
        .with_context(|| format!("cannot reach svc-dispatch at {}", args.dispatch))?;
    let client = DispatchClient::new(channel);
    let date = chrono::Utc::now().timestamp();
    let batches: Vec<Vec<PushJob>> = (0..args.drain_jobs)
        .map(|k| {
            let user = &users[k % users.len()];
            let peer = &users[(k + 1) % users.len()];
            PushJob {
                event_id: uuid::Uuid::new_v4().to_string(),
                user_id: user.id,
                origin_auth_key_id: 0,
                update: Some(PtsUpdate {
                    pts: 1_000_000_000 + k as i32,
                    pts_count: 1,
                    date,
                    update: Some(Update {
                        kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                            message: Some(Message {
                                id: k as i64 + 1,
                                peer_id: Some(Peer::user(peer.id)),
                                from_user_id: peer.id,
                                date,
                                text: "drain".into(),
                                ..Default::default()
                            }),
                            random_id: 0,
                        })),
                    }),
                }),
            }
        })
        .collect::<Vec<_>>()
        .chunks(DRAIN_BATCH)
        .map(<[PushJob]>::to_vec)
        .collect();
    let start = Instant::now();
    let outcomes = stream::iter(batches)
        .map(|jobs| {
            let client = client.clone();
            async move {
                let mut last = String::new();
                for _ in 0..3 {
                    // Idempotent by event id: a retry after a timeout is harmless.
                    match RPC
                        .unary(
                            client
                                .clone()
                                .enqueue(RPC.request(EnqueueRequest { jobs: jobs.clone() })),
                        )
                        .await
                    {
                        Ok(r) => return Ok(r.accepted as u64),
                        Err(e) => last = e.code(),
                    }
                }
                Err(last)
            }
        })
        .buffer_unordered(DRAIN_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let enqueue_s = start.elapsed().as_secs_f64();
    let mut accepted = 0;
    for o in outcomes {
        match o {
            Ok(n) => accepted += n,
            Err(code) => errors.add("enqueue", &code),
        }
    }
    let mut complete = false;
    while start.elapsed() < DRAIN_CAP {
        let (pending, _) = push_backlog(db).await?;
        if pending == 0 {
            complete = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let drain_s = start.elapsed().as_secs_f64();
    let (_, failed_after) = push_backlog(db).await?;
    Ok(DrainOutcome {
        accepted,
        enqueue_s,
        drain_s,
        jobs_per_s: accepted as f64 / drain_s,
        complete,
        pending_before,
        failed_before,
        failed_after,
    })
}
