//! The outbox's admin API against a migrated schema, served over gRPC: the relay's failed rows
//! listed page by page, requeued by id and by destination and then delivered exactly once,
//! and calls without the right token refused.

use std::sync::{Arc, Mutex};

use oxigram_outbox::{
    AdminService, Destination, NewRow, Outbox, OutboxMessage, Refused, RelayConfig,
};
use oxigram_proto::admin::v1::{
    ListFailedOutboxRequest, RequeueOutboxRequest, outbox_admin_client::OutboxAdminClient,
};
use oxigram_testkit::store;
use tonic::{Code, Request, transport::Channel};
use uuid::Uuid;

const SCHEMA: &str = "outbox_admin_test";
const TOKEN: &str = "s3cret-operator-token";

/// Refuses everything as malformed until `healed`, then takes everything, recording each
/// event it took.
#[derive(Default)]
struct Mending {
    healed: Mutex<bool>,
    taken: Mutex<Vec<Uuid>>,
}

impl Destination for Mending {
    const NAME: &'static str = "mending";

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        if !self.healed.lock().map(|h| *h).unwrap_or(false) {
            return Err(Refused::permanent("mending cannot read it yet"));
        }
        if let Ok(mut taken) = self.taken.lock() {
            taken.extend(batch.iter().map(|m| m.event_id));
        }
        Ok(())
    }
}

fn with_token<T>(message: T, token: Option<&str>) -> anyhow::Result<Request<T>> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", token.parse()?);
    }
    Ok(request)
}

async fn serve(pool: sqlx::PgPool) -> anyhow::Result<OutboxAdminClient<Channel>> {
    let admin = AdminService::server(pool, TOKEN).ok_or_else(|| anyhow::anyhow!("admin off"))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(admin)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    Ok(OutboxAdminClient::connect(format!("http://{addr}")).await?)
}

#[tokio::test]
async fn failed_rows_are_listed_by_page_requeued_and_then_delivered_once() -> anyhow::Result<()> {
    assert!(AdminService::server(sqlx::PgPool::connect_lazy("postgres://x")?, "").is_none());
    let config = RelayConfig::from_millis(100, 60_000, 50, 1, 0, 0, 0);
    let db = store::migrated(SCHEMA, &[&oxigram_outbox::MIGRATOR]).await?;
    let outbox = Outbox::new(db.pool.clone(), SCHEMA, config);
    // Three rows (one per transaction), all refused once and so kept failed.
    let events: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    for &event in &events {
        let mut tx = db.pool.begin().await?;
        outbox
            .enqueue(&mut tx, &[NewRow::new(Mending::NAME, event, b"x".to_vec())])
            .await?;
        tx.commit().await?;
    }
    let mending = Arc::new(Mending::default());
    let relay = outbox.relay(mending.clone());
    while relay.round().await? > 0 {}
    let mut admin = serve(db.pool.clone()).await?;
    let bearer = format!("Bearer {TOKEN}");

    // Pages of two by seek id: every failed row once, the last page says there is no more.
    let page = |after_id| ListFailedOutboxRequest {
        destination: Mending::NAME.into(),
        after_id,
        limit: 2,
    };
    let first = admin
        .list_failed_outbox(with_token(page(0), Some(&bearer))?)
        .await?
        .into_inner();
    assert_eq!(first.rows.len(), 2);
    assert!(
        first.rows.iter().all(|r| r.attempts == 1
            && r.events == 1
            && r.last_error == "mending cannot read it yet")
    );
    let second = admin
        .list_failed_outbox(with_token(page(first.next_after_id), Some(&bearer))?)
        .await?
        .into_inner();
    assert_eq!((second.rows.len(), second.next_after_id), (1, 0));
    let other = admin
        .list_failed_outbox(with_token(
            ListFailedOutboxRequest {
                destination: "elsewhere".into(),
                ..page(0)
            },
            Some(&bearer),
        )?)
        .await?
        .into_inner();
    assert!(other.rows.is_empty());

    // The destination is mended: one row requeued by id, then the rest by destination.
    if let Ok(mut healed) = mending.healed.lock() {
        *healed = true;
    }
    let by_id = RequeueOutboxRequest {
        ids: vec![first.rows[0].id, 999_999_999],
        destination: String::new(),
    };
    let moved = admin
        .requeue_outbox(with_token(by_id.clone(), Some(&bearer))?)
        .await?
        .into_inner();
    assert_eq!(moved.requeued, 1);
    assert_eq!(relay.round().await?, 1);
    // Requeueing a row already delivered finds nothing to move.
    let again = admin
        .requeue_outbox(with_token(by_id, Some(&bearer))?)
        .await?
        .into_inner();
    assert_eq!(again.requeued, 0);
    let rest = RequeueOutboxRequest {
        ids: vec![],
        destination: Mending::NAME.into(),
    };
    let moved = admin
        .requeue_outbox(with_token(rest, Some(&bearer))?)
        .await?
        .into_inner();
    assert_eq!(moved.requeued, 2);
    while relay.round().await? > 0 {}
    let mut taken = mending.taken.lock().map(|t| t.clone()).unwrap_or_default();
    taken.sort();
    let mut expected = events.clone();
    expected.sort();
    assert_eq!(taken, expected, "each event delivered exactly once");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(&db.pool)
        .await?;
    assert_eq!(left, 0);

    // Refused calls, each with its code.
    let wrong = format!("Bearer {TOKEN}x");
    let cases: [(Option<&str>, RequeueOutboxRequest, Code, &str); 5] = [
        (
            None,
            RequeueOutboxRequest::default(),
            Code::Unauthenticated,
            "ADMIN_TOKEN_INVALID",
        ),
        (
            Some(&wrong),
            RequeueOutboxRequest::default(),
            Code::Unauthenticated,
            "ADMIN_TOKEN_INVALID",
        ),
        (
            Some(TOKEN),
            RequeueOutboxRequest::default(),
            Code::Unauthenticated,
            "ADMIN_TOKEN_INVALID",
        ),
        (
            Some("Bearer "),
            RequeueOutboxRequest::default(),
            Code::Unauthenticated,
            "ADMIN_TOKEN_INVALID",
        ),
        (
            Some(&bearer),
            RequeueOutboxRequest::default(),
            Code::InvalidArgument,
            "INPUT_REQUEST_INVALID",
        ),
    ];
    for (token, request, code, stable) in cases {
        let refused = admin
            .requeue_outbox(with_token(request, token)?)
            .await
            .err()
            .ok_or_else(|| anyhow::anyhow!("{token:?} was let in"))?;
        assert_eq!(refused.code(), code, "{token:?}");
        assert_eq!(
            oxigram_errors::code_of(&refused).as_deref(),
            Some(stable),
            "{token:?}"
        );
    }
    let unlisted = admin
        .list_failed_outbox(with_token(page(0), Some(&wrong))?)
        .await
        .err()
        .map(|s| s.code());
    assert_eq!(unlisted, Some(Code::Unauthenticated));
    Ok(())
}
