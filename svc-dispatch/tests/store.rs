//! svc-dispatch's Enqueue against its own migrated schema: push jobs stored durably once per
//! event id, pushed right after commit, left to the relay when the push fails; bad requests
//! get their codes.

use std::{sync::Arc, time::Duration};

use oxigram_errors::code_of;
use oxigram_outbox::{
    Destination, FastPath, Outbox, OutboxMessage, Refused, RelayConfig, decode_payloads,
};
use oxigram_proto::{
    dispatch::v1::{EnqueueRequest, dispatch_server::Dispatch},
    types::v1::PushJob,
};
use oxigram_testkit::store::{self, Migrated};
use svc_dispatch::{DispatchService, TO_GATEWAYS};
use tokio::sync::mpsc;
use tonic::Request;

/// Stands for the gateways: records each push, or refuses every one.
struct Gateways {
    pushed: mpsc::UnboundedSender<Vec<PushJob>>,
    refuse: bool,
}

impl Destination for Gateways {
    const NAME: &'static str = TO_GATEWAYS;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        if self.refuse {
            return Err(Refused::transient("the gateways are down"));
        }
        let jobs = decode_payloads(batch)?;
        let _ = self.pushed.send(jobs);
        Ok(())
    }
}

struct Fixture {
    service: DispatchService,
    pushed: mpsc::UnboundedReceiver<Vec<PushJob>>,
    db: Migrated,
}

async fn dispatch(refuse: bool) -> anyhow::Result<Fixture> {
    let db = store::migrated(
        svc_dispatch::SCHEMA,
        &[&svc_dispatch::MIGRATOR, &oxigram_outbox::MIGRATOR],
    )
    .await?;
    let outbox = Outbox::new(
        db.pool.clone(),
        svc_dispatch::SCHEMA,
        RelayConfig::default(),
    );
    let (tx, pushed) = mpsc::unbounded_channel();
    let gateways = Arc::new(Gateways { pushed: tx, refuse });
    let fast_path = FastPath::start(outbox.clone(), gateways, Duration::ZERO);
    Ok(Fixture {
        service: DispatchService::new(db.pool.clone(), outbox, fast_path),
        pushed,
        db,
    })
}

fn job(user_id: i64) -> PushJob {
    PushJob {
        event_id: uuid::Uuid::new_v4().to_string(),
        user_id,
        origin_auth_key_id: 0,
        update: None,
    }
}

async fn enqueue(d: &Fixture, jobs: &[PushJob]) -> Result<i32, tonic::Status> {
    Ok(d.service
        .enqueue(Request::new(EnqueueRequest {
            jobs: jobs.to_vec(),
        }))
        .await?
        .into_inner()
        .accepted)
}

/// The jobs pushed until `n` have arrived (or five seconds have passed).
async fn pushed(d: &mut Fixture, n: usize) -> Vec<PushJob> {
    let mut jobs = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while jobs.len() < n {
        match tokio::time::timeout_at(deadline, d.pushed.recv()).await {
            Ok(Some(batch)) => jobs.extend(batch),
            _ => break,
        }
    }
    jobs
}

async fn count(d: &Fixture, sql: &str) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(&d.db.pool)
        .await?)
}

#[tokio::test]
async fn jobs_are_stored_once_per_event_and_pushed_after_commit() -> anyhow::Result<()> {
    let mut d = dispatch(false).await?;
    let jobs = [job(1), job(2), job(1)];
    assert_eq!(enqueue(&d, &jobs).await?, 3);
    let by_id = |mut jobs: Vec<PushJob>| {
        jobs.sort_by(|a, b| a.event_id.cmp(&b.event_id));
        jobs
    };
    assert_eq!(by_id(pushed(&mut d, 3).await), by_id(jobs.to_vec()));

    // A replay of two of them with one new job: only the new one is stored and pushed.
    let again = [jobs[0].clone(), job(3), jobs[2].clone()];
    assert_eq!(enqueue(&d, &again).await?, 1);
    assert_eq!(pushed(&mut d, 1).await, vec![again[1].clone()]);
    assert_eq!(count(&d, "SELECT count(*) FROM inbox").await?, 4);

    // Nothing more is pushed, and the pushed rows are deleted.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while count(&d, "SELECT count(*) FROM outbox").await? > 0 {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "acknowledged rows are still in the outbox"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(d.pushed.try_recv().is_err());
    Ok(())
}

#[tokio::test]
async fn a_failed_push_leaves_the_jobs_to_the_relay() -> anyhow::Result<()> {
    let d = dispatch(true).await?;
    assert_eq!(enqueue(&d, &[job(1), job(2)]).await?, 2);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let waiting = count(
        &d,
        &format!("SELECT coalesce(sum(items), 0)::bigint FROM outbox WHERE destination = '{TO_GATEWAYS}' AND status = 0"),
    )
    .await?;
    assert_eq!(waiting, 2);
    Ok(())
}

#[tokio::test]
async fn bad_requests_get_their_codes_and_store_nothing() -> anyhow::Result<()> {
    let d = dispatch(false).await?;
    let too_many: Vec<PushJob> = (0..1001).map(job).collect();
    let not_a_uuid = PushJob {
        event_id: "not-a-uuid".into(),
        ..job(1)
    };
    let cases = [
        (too_many, "LIMIT_INVALID"),
        (vec![job(1), not_a_uuid], "RANDOM_ID_INVALID"),
    ];
    for (jobs, code) in cases {
        let refused = enqueue(&d, &jobs).await.err().map(|s| code_of(&s));
        assert_eq!(refused, Some(Some(code.to_owned())), "{code}");
    }
    assert_eq!(count(&d, "SELECT count(*) FROM inbox").await?, 0);
    assert_eq!(count(&d, "SELECT count(*) FROM outbox").await?, 0);
    // An empty request is fine and does nothing.
    assert_eq!(enqueue(&d, &[]).await?, 0);
    Ok(())
}
