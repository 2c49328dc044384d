//! The operator's admin API on a running system: a send whose destination refused its events
//! as malformed ends as a failed row of svc-messages' outbox; `oxictl admin failed` and the
//! gRPC API list it; requeued once svc-updates is healthy again it is delivered exactly once;
//! and every service refuses a call without the right token with ADMIN_TOKEN_INVALID.

use std::{
    convert::Infallible,
    net::SocketAddr,
    process::Output,
    task::{Context, Poll},
    time::Duration,
};

use oxigram::Target;
use oxigram_proto::admin::v1::{
    ListFailedOutboxRequest, ListFailedOutboxResponse, RequeueOutboxRequest,
    outbox_admin_client::OutboxAdminClient,
};
use oxigram_tests::{Mode, System, client::code, eventually, oxictl_command};
use tonic::{Code, Request, Status, body::Body, server::NamedService};

const TOKEN: &str = "operator-token-for-the-suite";

/// A stand-in for svc-updates that refuses every call as malformed (INVALID_ARGUMENT), as a
/// svc-updates that cannot read what it is sent would.
#[derive(Clone)]
struct RefusingUpdates;

impl NamedService for RefusingUpdates {
    const NAME: &'static str = "oxigram.updates.v1.Updates";
}

impl tower::Service<http::Request<Body>> for RefusingUpdates {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<Body>) -> Self::Future {
        std::future::ready(Ok(Status::invalid_argument(
            "this svc-updates cannot read the events",
        )
        .into_http()))
    }
}

/// Serves [`RefusingUpdates`] at `addr` until the returned sender fires.
async fn refusing_updates_at(
    addr: SocketAddr,
) -> anyhow::Result<(
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RefusingUpdates)
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                async {
                    let _ = stopped.await;
                },
            ),
    );
    Ok((stop, served))
}

fn with_token<T>(message: T, authorization: Option<&str>) -> anyhow::Result<Request<T>> {
    let mut request = Request::new(message);
    if let Some(value) = authorization {
        request
            .metadata_mut()
            .insert("authorization", value.parse()?);
    }
    Ok(request)
}

async fn admin_of(
    system: &System,
    target: Target,
) -> anyhow::Result<OutboxAdminClient<tonic::transport::Channel>> {
    let endpoint = endpoint(system, target);
    Ok(OutboxAdminClient::connect(endpoint).await?)
}

fn endpoint(system: &System, target: Target) -> String {
    let s = &system.config.services;
    match target {
        Target::Gateway => &s.gateway,
        Target::Messages => &s.messages,
        Target::Updates => &s.updates,
        Target::Dialogs => &s.dialogs,
        Target::Dispatch => &s.dispatch,
        Target::Media => &s.media,
    }
    .endpoint
    .clone()
}

/// Runs `oxictl admin …` against `system`, the services' endpoints from a configuration file
/// as an operator would keep it; `env` adds variables.
fn oxictl(system: &System, env: &[(&str, &str)], args: &[&str]) -> anyhow::Result<Output> {
    let mut file = String::new();
    for target in Target::ALL {
        file.push_str(&format!(
            "[services.{}]\nendpoint = \"{}\"\n\n",
            target.name(),
            endpoint(system, target)
        ));
    }
    file.push_str(&format!("[admin]\ntoken = \"{TOKEN}\"\n"));
    let config = system.dir.join("oxictl-admin.toml");
    std::fs::write(&config, file)?;
    let output = oxictl_command()?
        .arg("admin")
        .arg("--config")
        .arg(&config)
        .args(args)
        .envs(env.iter().copied())
        .output()?;
    Ok(output)
}

/// An `oxictl admin` run that must fail: its added variables, its arguments, and what its
/// stderr must say.
type OxictlCase<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a str);

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_send_is_listed_requeued_and_delivered_once() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.admin.token = TOKEN.into();
    // One refusal as malformed ends a row.
    config.outbox.max_attempts = 1;
    let mut system = System::start_with(config, ground, Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15559301", "Alice"), ("15559302", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);

    // svc-updates is replaced by one that refuses every event as malformed.
    system.stop_service(Target::Updates).await?;
    let (stop_refusing, refusing) =
        refusing_updates_at(system.config.services.updates.listen).await?;
    let sent = alice.send(bob_id, 93, "refused, then requeued").await?;
    assert_eq!(sent.pts, 0, "svc-updates took nothing");

    let mut messages = admin_of(&system, Target::Messages).await?;
    let bearer = format!("Bearer {TOKEN}");
    let list = |after_id| ListFailedOutboxRequest {
        destination: "updates".into(),
        after_id,
        limit: 0,
    };
    let failed: ListFailedOutboxResponse =
        eventually(Duration::from_secs(20), "the row kept as failed", || {
            let (mut messages, request) = (messages.clone(), with_token(list(0), Some(&bearer)));
            async move {
                let page = messages.list_failed_outbox(request?).await?.into_inner();
                Ok((!page.rows.is_empty()).then_some(page))
            }
        })
        .await?;
    assert_eq!(failed.rows.len(), 1, "{failed:?}");
    assert_eq!(failed.next_after_id, 0, "one page");
    let row = &failed.rows[0];
    assert_eq!(
        (row.destination.as_str(), row.events, row.attempts),
        ("updates", 2, 1),
        "the send's row: one event per owner, refused once"
    );
    assert!(
        row.last_error.contains("cannot read the events"),
        "{}",
        row.last_error
    );

    // oxictl lists it, from the configuration's endpoints and token.
    let listed = oxictl(
        &system,
        &[],
        &[
            "failed",
            "--service",
            "messages",
            "--destination",
            "updates",
        ],
    )?;
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let table = text(&listed.stdout);
    let line = table
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(row.id.to_string().as_str()))
        .ok_or_else(|| anyhow::anyhow!("row {} not in {table}", row.id))?;
    assert_eq!(
        line.split_whitespace().take(5).collect::<Vec<_>>(),
        ["messages", row.id.to_string().as_str(), "updates", "2", "1"]
    );
    assert!(line.contains("cannot read the events"), "{line}");
    assert_eq!(table.lines().last(), Some("failed rows: messages 1"));
    // `--service all` while the stand-in (no admin API) holds svc-updates' port: the others
    // are listed, the stand-in is named, and the exit is non-zero.
    let all = oxictl(&system, &[], &["failed"])?;
    assert!(!all.status.success());
    assert!(
        text(&all.stderr).contains("updates at http://")
            && text(&all.stderr).contains("serves no admin API"),
        "{}",
        text(&all.stderr)
    );
    assert!(text(&all.stdout).contains(&format!(" {} ", row.id)));
    assert!(
        text(&all.stdout).contains("messages 1, updates ?, dialogs 0"),
        "{}",
        text(&all.stdout)
    );

    // svc-updates is healthy again; the failed row is not retried by itself.
    stop_refusing
        .send(())
        .map_err(|_| anyhow::anyhow!("the refusing server stopped early"))?;
    refusing.await??;
    system.start_service(Target::Updates)?;
    system.wait_serving(Target::Updates).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        bob.difference(0).await?.new_messages.is_empty(),
        "a failed row stays failed until requeued"
    );

    // Every service answers `--service all` now.
    let all = oxictl(&system, &[], &["failed"])?;
    assert!(all.status.success(), "{}", text(&all.stderr));
    assert!(text(&all.stdout).contains(&format!(" {} ", row.id)));

    let requeued = oxictl(
        &system,
        &[],
        &[
            "requeue",
            "--service",
            "messages",
            "--ids",
            &row.id.to_string(),
        ],
    )?;
    assert!(requeued.status.success(), "{}", text(&requeued.stderr));
    assert_eq!(text(&requeued.stdout), "messages: requeued 1 of 1 row(s)\n");

    let diff = eventually(Duration::from_secs(20), "Bob's message", || async {
        let d = bob.difference(0).await?;
        Ok((!d.new_messages.is_empty()).then_some(d))
    })
    .await?;
    assert_eq!(diff.new_messages.len(), 1);
    assert_eq!(diff.new_messages[0].text, "refused, then requeued");
    eventually(Duration::from_secs(20), "the outbox to drain", || async {
        let left: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM messages.outbox WHERE destination = 'updates'",
        )
        .fetch_one(&mut system.db().await?)
        .await?;
        Ok((left == 0).then_some(()))
    })
    .await?;
    // A second requeue of the delivered row finds nothing to move.
    let again = messages
        .requeue_outbox(with_token(
            RequeueOutboxRequest {
                ids: vec![row.id],
                destination: String::new(),
            },
            Some(&bearer),
        )?)
        .await?
        .into_inner();
    assert_eq!(again.requeued, 0);
    let logged: Vec<(i64, i32)> =
        sqlx::query_as("SELECT user_id, pts FROM updates.update_log ORDER BY user_id")
            .fetch_all(&mut system.db().await?)
            .await?;
    let mut expected = vec![(alice_id, 1), (bob_id, 1)];
    expected.sort();
    assert_eq!(logged, expected, "exactly one update per owner");
    assert_eq!(bob.difference(0).await?.new_messages.len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_refuses_a_wrong_token() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.admin.token = TOKEN.into();
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    for target in Target::ALL {
        system.wait_serving(target).await?;
    }
    let bearer = format!("Bearer {TOKEN}");
    let wrong = format!("Bearer {TOKEN}-not");
    let refused: [Option<&str>; 5] = [
        None,
        Some(&wrong),
        Some(TOKEN),
        Some("Bearer "),
        Some("Basic b3BlcmF0b3I="),
    ];
    for target in Target::ALL {
        let mut admin = admin_of(&system, target).await?;
        let page = admin
            .list_failed_outbox(with_token(
                ListFailedOutboxRequest::default(),
                Some(&bearer),
            )?)
            .await?
            .into_inner();
        assert_eq!(page.next_after_id, 0, "{}", target.name());
        for authorization in refused {
            let calls: [Result<(), Status>; 2] = [
                admin
                    .list_failed_outbox(with_token(
                        ListFailedOutboxRequest::default(),
                        authorization,
                    )?)
                    .await
                    .map(drop),
                admin
                    .requeue_outbox(with_token(
                        RequeueOutboxRequest {
                            ids: vec![1],
                            destination: String::new(),
                        },
                        authorization,
                    )?)
                    .await
                    .map(drop),
            ];
            for call in calls {
                let status = call
                    .err()
                    .ok_or_else(|| anyhow::anyhow!("{} let {authorization:?} in", target.name()))?;
                assert_eq!(
                    (status.code(), code(&status).as_deref()),
                    (Code::Unauthenticated, Some("ADMIN_TOKEN_INVALID")),
                    "{} with {authorization:?}",
                    target.name()
                );
            }
        }
    }

    // oxictl: a wrong token (the variable wins over the configuration's) and no token at all
    // each end with a clear error and a non-zero exit.
    let cases: [OxictlCase; 2] = [
        (
            &[("OXIGRAM_ADMIN_TOKEN", "not-the-token")],
            &["failed", "--service", "updates"],
            "updates refused the admin token (ADMIN_TOKEN_INVALID",
        ),
        (
            &[],
            &[
                "--token",
                "not-the-token",
                "requeue",
                "--service",
                "media",
                "--destination",
                "updates",
            ],
            "media refused the admin token (ADMIN_TOKEN_INVALID",
        ),
    ];
    for (env, args, expected) in cases {
        let output = oxictl(&system, env, args)?;
        assert!(!output.status.success(), "{args:?} succeeded");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(expected), "{expected:?} not in {stderr:?}");
    }
    let without: [(&[&str], &str); 2] = [
        (
            &["admin", "failed", "--service", "messages"],
            "no admin token",
        ),
        (
            &["admin", "--config", "/nonexistent/oxigram.toml", "failed"],
            "no configuration at /nonexistent/oxigram.toml",
        ),
    ];
    for (args, expected) in without {
        let output = oxictl_command()?.args(args).output()?;
        assert!(!output.status.success(), "{args:?} succeeded");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(expected), "{expected:?} not in {stderr:?}");
    }
    Ok(())
}
