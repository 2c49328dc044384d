//! The hand-off target (updates) stops after messages committed a send: the send is still
//! PERSISTED, and when updates is back the event arrives exactly once.

use std::time::Duration;

use oxigram::Target;
use oxigram_proto::types::v1::{Message, Peer, Update, UpdateNewMessage, UserEvent, update};
use oxigram_tests::{Mode, System, TestClient, eventually};
use prost::Message as _;
use sqlx::Row;

async fn recovers(mode: Mode) -> anyhow::Result<()> {
    let mut system = System::start(mode).await?;
    let mut alice = system.device().await?;
    let alice_id = alice.sign_up("15550101", "Alice").await?.id;
    let mut bob = system.device().await?;
    let bob_id = bob.sign_up("15550102", "Bob").await?.id;

    system.stop_service(Target::Updates).await?;
    let sent = alice.send(bob_id, 77, "sent while updates is down").await?;
    let message = sent
        .message
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no message"))?;
    assert_eq!(
        sent.pts, 0,
        "no pts without updates: the client is told to catch up"
    );

    let mut db = system.db().await?;
    let pending: (i64, Option<i64>) = sqlx::query_as(
        "SELECT count(*), sum(items) FROM messages.outbox WHERE destination = 'updates' AND status = 0",
    )
    .fetch_one(&mut db)
    .await?;
    assert_eq!(
        pending,
        (1, Some(2)),
        "one event per owner waits in the outbox, in one row"
    );

    updates_back_and_bob_has(&mut system, &bob, "sent while updates is down").await?;

    eventually(Duration::from_secs(20), "the outbox to drain", || async {
        let left: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM messages.outbox WHERE destination = 'updates'",
        )
        .fetch_one(&mut system.db().await?)
        .await?;
        Ok((left == 0).then_some(()))
    })
    .await?;

    // A resend after the lost response: the original message, now with its pts.
    let again = alice.send(bob_id, 77, "sent while updates is down").await?;
    assert_eq!(again.message.map(|m| m.id), Some(message.id));
    assert_eq!(again.pts, 1);

    let rows = sqlx::query("SELECT user_id, pts FROM updates.update_log ORDER BY user_id")
        .fetch_all(&mut db)
        .await?;
    let logged: Vec<(i64, i32)> = rows
        .iter()
        .map(|r| Ok((r.try_get("user_id")?, r.try_get("pts")?)))
        .collect::<Result<_, sqlx::Error>>()?;
    let mut expected = vec![(alice_id, 1), (bob_id, 1)];
    expected.sort();
    assert_eq!(
        logged, expected,
        "exactly one update per owner, despite relay and replay"
    );
    assert_eq!(alice.difference(0).await?.updates.len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_stopped_gracefully_in_one_process() -> anyhow::Result<()> {
    recovers(Mode::OneProcess).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_process_killed() -> anyhow::Result<()> {
    recovers(Mode::Processes).await
}

/// A row written before rows were framed (one bare event in the row's own columns) is still
/// delivered after an upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_from_before_framing_is_delivered() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let mut alice = system.device().await?;
    let alice_id = alice.sign_up("15550161", "Alice").await?.id;
    let mut bob = system.device().await?;
    let bob_id = bob.sign_up("15550162", "Bob").await?.id;
    let event_id = uuid::Uuid::new_v4();
    let event = UserEvent {
        event_id: event_id.to_string(),
        user_id: bob_id,
        pts_count: 1,
        date: 1_700_000_000,
        update: Some(Update {
            kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                message: Some(Message {
                    id: 1,
                    peer_id: Some(Peer::user(alice_id)),
                    from_user_id: alice_id,
                    date: 1_700_000_000,
                    text: "written before framing".into(),
                    ..Default::default()
                }),
                random_id: 0,
            })),
        }),
        origin_auth_key_id: 0,
        peer_box_id: 1,
        pts: 0,
        deletions: Vec::new(),
        unread_reactions_delta: 0,
    };
    let mut db = system.db().await?;
    sqlx::query(
        "INSERT INTO messages.outbox (destination, event_id, payload) VALUES ('updates', $1, $2)",
    )
    .bind(event_id)
    .bind(event.encode_to_vec())
    .execute(&mut db)
    .await?;
    let diff = eventually(Duration::from_secs(20), "Bob's difference", || async {
        let d = bob.difference(0).await?;
        Ok((!d.updates.is_empty()).then_some(d))
    })
    .await?;
    assert_eq!(diff.updates.len(), 1);
    // The log row itself: the difference shows no message for a box svc-messages does not
    // hold (as for a deleted one), and this event names a box no send made.
    let body: Vec<u8> =
        sqlx::query_scalar("SELECT body FROM updates.update_log WHERE user_id = $1 AND pts = $2")
            .bind(bob_id)
            .bind(diff.updates[0].pts)
            .fetch_one(&mut db)
            .await?;
    let logged = Update::decode(body.as_slice())?.kind;
    let logged = logged.as_ref();
    assert!(
        matches!(logged, Some(update::Kind::NewMessage(n))
            if n.message.as_ref().map(|m| m.text.as_str()) == Some("written before framing")),
        "the row's event was logged: {logged:?}"
    );
    eventually(Duration::from_secs(20), "the row to be deleted", || async {
        let left: i64 = sqlx::query_scalar("SELECT count(*) FROM messages.outbox")
            .fetch_one(&mut system.db().await?)
            .await?;
        Ok((left == 0).then_some(()))
    })
    .await?;
    Ok(())
}

/// Receivers forget event ids past their retention, and keep the recent ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbox_prunes_only_past_retention() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let mut alice = system.device().await?;
    alice.sign_up("15550151", "Alice").await?;
    let mut bob = system.device().await?;
    let bob_id = bob.sign_up("15550152", "Bob").await?.id;
    alice.send(bob_id, 1, "remembered").await?;
    let url = system.config.database_url.clone().unwrap_or_default();
    let dispatch = oxigram_storage::connect_lazy(&url, "dispatch", 2)?;
    let remembered = eventually(Duration::from_secs(15), "dispatch to receive", || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox")
            .fetch_one(&dispatch)
            .await?;
        Ok((n >= 2).then_some(n))
    })
    .await?;
    let kept = oxigram_outbox::prune_inbox(&dispatch, Duration::from_secs(3600)).await?;
    assert_eq!(kept, 0, "recent event ids stay");
    let pruned = oxigram_outbox::prune_inbox(&dispatch, Duration::ZERO).await?;
    assert_eq!(pruned as i64, remembered);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM inbox")
        .fetch_one(&dispatch)
        .await?;
    assert_eq!(left, 0);
    Ok(())
}

/// A hand-off that keeps failing never gives up on a row: an outage longer than every attempt
/// the relay would once have made still ends with the message logged, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_outlasting_the_attempts_loses_nothing() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.outbox.max_attempts = 3;
    let mut system = System::start_with(config, ground, Mode::Processes).await?;
    let mut alice = system.device().await?;
    alice.sign_up("15550171", "Alice").await?;
    let mut bob = system.device().await?;
    let bob_id = bob.sign_up("15550172", "Bob").await?.id;

    system.stop_service(Target::Updates).await?;
    alice.send(bob_id, 71, "sent during a long outage").await?;
    // Far more attempts than max_attempts fail meanwhile (grace 300 ms, backoff 50..500 ms).
    let mut db = system.db().await?;
    eventually(
        Duration::from_secs(20),
        "attempts past the limit",
        || async {
            let attempts: Option<i32> = sqlx::query_scalar(
                "SELECT max(attempts) FROM messages.outbox WHERE destination = 'updates'",
            )
            .fetch_one(&mut system.db().await?)
            .await?;
            Ok((attempts.unwrap_or(0) > 6).then_some(()))
        },
    )
    .await?;
    let failed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM messages.outbox WHERE destination = 'updates' AND status <> 0",
    )
    .fetch_one(&mut db)
    .await?;
    assert_eq!(
        failed, 0,
        "an unreachable destination never fails a row for good"
    );

    updates_back_and_bob_has(&mut system, &bob, "sent during a long outage").await?;
    Ok(())
}

/// The relay's two kinds of failure, on an outbox of its own: a destination that is down is
/// retried without end; one that refuses the events as malformed keeps the row as failed once
/// out of attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_permanent_refusals_end_in_failure() -> anyhow::Result<()> {
    use oxigram_outbox::{Destination, NewRow, Outbox, OutboxMessage, Refused, RelayConfig};

    struct Refusing(Refused);
    impl Destination for Refusing {
        const NAME: &'static str = "refusing";
        async fn deliver(&self, _: &[OutboxMessage]) -> Result<(), Refused> {
            Err(self.0.clone())
        }
    }

    let infra = oxigram_tests::infra().await?;
    let url = oxigram_tests::fresh_database(&infra).await?;
    let pool = oxigram_storage::connect_lazy(&url, "relaytest", 2)?;
    oxigram_storage::migrate(&pool, "relaytest", &[&oxigram_outbox::MIGRATOR]).await?;
    // No grace, no backoff: every round may claim the row again.
    let config = RelayConfig::from_millis(10, 10_000, 10, 3, 0, 0, 0);
    let outbox = Outbox::new(pool.clone(), "relaytest", config);
    let status_after_rounds = |refused: Refused| {
        let (outbox, pool) = (outbox.clone(), pool.clone());
        async move {
            let row = NewRow::new("refusing", uuid::Uuid::new_v4(), vec![1]);
            let mut tx = pool.begin().await?;
            let ids = outbox.enqueue(&mut tx, [&row]).await?;
            tx.commit().await?;
            let relay = outbox.relay(Refusing(refused));
            for _ in 0..10 {
                relay.round().await?;
            }
            let (status, attempts): (i16, i32) =
                sqlx::query_as("SELECT status, attempts FROM outbox WHERE id = $1")
                    .bind(ids[0])
                    .fetch_one(&pool)
                    .await?;
            sqlx::query("DELETE FROM outbox").execute(&pool).await?;
            anyhow::Ok((status, attempts))
        }
    };
    assert_eq!(
        status_after_rounds(Refused::transient("down")).await?,
        (0, 10),
        "a destination that is down: pending after ten attempts"
    );
    assert_eq!(
        status_after_rounds(Refused::permanent("malformed")).await?,
        (2, 3),
        "a malformed row: failed after max_attempts"
    );

    // A running relay publishes its backlog: the age of its oldest pending row, and the rows
    // kept as failed.
    for refused in [Refused::permanent("malformed"), Refused::transient("down")] {
        let row = NewRow::new("refusing", uuid::Uuid::new_v4(), vec![1]);
        let mut tx = pool.begin().await?;
        outbox.enqueue(&mut tx, [&row]).await?;
        tx.commit().await?;
        let stop = tokio_util::sync::CancellationToken::new();
        let running = tokio::spawn(outbox.relay(Refusing(refused)).run(stop.clone()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.cancel();
        running.await?;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(
        outbox
            .relay(Refusing(Refused::transient("down")))
            .run(stop.clone()),
    );
    let gauge = |name: &str| {
        oxigram_telemetry::metrics::render()
            .lines()
            .find(|l| {
                l.starts_with(name) && l.contains("schema=\"relaytest\"") && l.contains("refusing")
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    // The relays before this one published ages of a few milliseconds.
    eventually(Duration::from_secs(5), "the pending row's age", || async {
        Ok(gauge("oxigram_outbox_oldest_pending_seconds").filter(|age| *age >= 1.0))
    })
    .await?;
    stop.cancel();
    running.await?;
    assert_eq!(gauge("oxigram_outbox_failed_rows"), Some(1.0));
    Ok(())
}

/// Starts svc-updates again and waits until Bob's difference holds exactly the one message
/// sent while it was down.
async fn updates_back_and_bob_has(
    system: &mut System,
    bob: &TestClient,
    text: &str,
) -> anyhow::Result<()> {
    system.start_service(Target::Updates)?;
    system.wait_serving(Target::Updates).await?;
    let diff = eventually(Duration::from_secs(20), "Bob's difference", || async {
        let d = bob.difference(0).await?;
        Ok((!d.updates.is_empty()).then_some(d))
    })
    .await?;
    assert_eq!(diff.updates.len(), 1);
    assert_eq!(diff.new_messages[0].text, text);
    Ok(())
}
