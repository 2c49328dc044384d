//! Real faults under the services run as separate processes: Redis and Postgres crash and come
//! back (on servers of the test's own, which it may restart), and svc-messages is killed with
//! SIGKILL mid-traffic. Each test prints what it measured (`cargo nextest ... --no-capture`).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context;
use oxigram_proto::{api::v1::StreamEvent, types::v1::update};
use oxigram_tests::{Mode, System, TestClient, client::next_update_where};
use tonic::{Code, Streaming};

/// The text of a message Bob's stream delivered, within `within`.
async fn next_message(
    stream: &mut Streaming<StreamEvent>,
    within: Duration,
) -> anyhow::Result<String> {
    let message = next_update_where(stream, |kind| match kind {
        update::Kind::NewMessage(new) => new.message.map(|m| m.text),
        _ => None,
    });
    tokio::time::timeout(within, message)
        .await
        .with_context(|| format!("no message on the stream within {within:?}"))?
}

/// Pushes after Redis lost the route table: an idle device whose route went with Redis gets a
/// message sent one second after Redis is back within one second of the send.
mod routes_after_redis_loss {
    use super::*;

    /// How Redis loses the table.
    #[derive(Debug, Clone, Copy)]
    enum Loss {
        /// SIGKILL and a start on the same port: empty, and every connection to it broken.
        Restart,
        /// FLUSHALL: empty, connections intact.
        Flush,
    }

    async fn idle_device_gets_the_next_push(loss: Loss) -> anyhow::Result<()> {
        let system = System::start_private(Mode::Processes).await?;
        let mut alice = system.device().await?;
        alice.sign_up("15550301", "Alice").await?;
        let mut bob = system.device().await?;
        let bob_id = bob.sign_up("15550302", "Bob").await?.id;

        // Bob's device opens its stream and stays idle; a first message shows its route works.
        let mut stream = bob.stream(0).await?;
        let before_at = Instant::now();
        alice.send(bob_id, 1, "before").await?;
        assert_eq!(
            next_message(&mut stream, Duration::from_secs(15)).await?,
            "before"
        );
        let usual = before_at.elapsed();

        let redis_url = system.config.redis_url.clone().context("no Redis URL")?;
        let route_key = format!("{}routes:{bob_id}", system.config.redis_key_prefix);
        let lost_at = Instant::now();
        match loss {
            Loss::Restart => system.restart_redis().await?,
            Loss::Flush => {
                let client = redis::Client::open(redis_url.as_str())?;
                let mut conn = client.get_multiplexed_async_connection().await?;
                redis::cmd("FLUSHALL").query_async::<()>(&mut conn).await?;
            }
        }
        let back_at = Instant::now();
        // When Bob's route is in Redis again (read on a connection of the test's own).
        let route_back = {
            let client = redis::Client::open(redis_url.as_str())?;
            let key = route_key.clone();
            tokio::spawn(async move {
                let deadline = back_at + Duration::from_secs(30);
                while Instant::now() < deadline {
                    if let Ok(mut conn) = client.get_multiplexed_async_connection().await
                        && let Ok(true) = redis::cmd("EXISTS")
                            .arg(&key)
                            .query_async::<bool>(&mut conn)
                            .await
                    {
                        return Some(Instant::now());
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                None
            })
        };

        tokio::time::sleep_until((back_at + Duration::from_secs(1)).into()).await;
        let sent_at = Instant::now();
        alice.send(bob_id, 2, "after").await?;
        let pushed = next_message(&mut stream, Duration::from_secs(15)).await?;
        let pushed_at = Instant::now();
        assert_eq!(pushed, "after");

        let route_back = route_back.await?;
        eprintln!(
            "faults: Redis {loss:?}: took {:?}; Bob's route back {}; send {:?} after Redis was back; \
             first push {:?} after the loss began ({:?} after Redis was back, {:?} after the send; \
             {usual:?} from send to push before the loss)",
            back_at - lost_at,
            route_back.map_or("never (30 s)".to_owned(), |at| format!(
                "{:?} after Redis was back",
                at - back_at
            )),
            sent_at - back_at,
            pushed_at - lost_at,
            pushed_at - back_at,
            pushed_at - sent_at,
        );
        assert!(
            pushed_at - sent_at <= Duration::from_secs(1),
            "the push took {:?} after the send: routes were not registered again in time",
            pushed_at - sent_at
        );
        Ok(())
    }

    #[tokio::test]
    async fn after_a_restart() -> anyhow::Result<()> {
        idle_device_gets_the_next_push(Loss::Restart).await
    }

    #[tokio::test]
    async fn after_a_flush() -> anyhow::Result<()> {
        idle_device_gets_the_next_push(Loss::Flush).await
    }
}

/// A failed send as the client saw it.
#[derive(Debug)]
struct Failure {
    random_id: i64,
    started: Instant,
    ended: Instant,
    code: Code,
    stable: Option<String>,
    message: String,
}

/// Sends from Alice to Bob, as a client retries: each failed send again with the same
/// random_id until it succeeds.
struct Traffic {
    failures: Mutex<Vec<Failure>>,
    sent: Mutex<Vec<i64>>,
    /// When each acknowledgement came, in order.
    acked_at: Mutex<Vec<Instant>>,
    stop: tokio_util::sync::CancellationToken,
}

/// Senders running at once: at most this many sends are in flight.
const SENDERS: i64 = 4;
/// How long one send may keep failing before the test gives up on it.
const RETRY_FOR: Duration = Duration::from_secs(30);

impl Traffic {
    fn start(
        alice: Arc<TestClient>,
        bob_id: i64,
    ) -> (Arc<Self>, Vec<tokio::task::JoinHandle<anyhow::Result<()>>>) {
        let traffic = Arc::new(Self {
            failures: Mutex::new(Vec::new()),
            sent: Mutex::new(Vec::new()),
            acked_at: Mutex::new(Vec::new()),
            stop: tokio_util::sync::CancellationToken::new(),
        });
        let senders = (0..SENDERS)
            .map(|sender| {
                let (traffic, alice) = (traffic.clone(), alice.clone());
                tokio::spawn(
                    async move { traffic.send_until_stopped(&alice, bob_id, sender).await },
                )
            })
            .collect();
        (traffic, senders)
    }

    async fn send_until_stopped(
        &self,
        alice: &TestClient,
        bob_id: i64,
        sender: i64,
    ) -> anyhow::Result<()> {
        // Disjoint random_ids per sender.
        let mut random_id = 1_000_000 * (sender + 1);
        while !self.stop.is_cancelled() {
            random_id += 1;
            let first_try = Instant::now();
            loop {
                let started = Instant::now();
                match alice
                    .send(bob_id, random_id, &format!("m{random_id}"))
                    .await
                {
                    Ok(_) => break,
                    Err(status) => {
                        let failure = Failure {
                            random_id,
                            started,
                            ended: Instant::now(),
                            code: status.code(),
                            stable: oxigram_tests::client::code(&status),
                            message: status.message().to_owned(),
                        };
                        self.failures
                            .lock()
                            .map_err(|_| anyhow::anyhow!("poisoned"))?
                            .push(failure);
                        anyhow::ensure!(
                            first_try.elapsed() < RETRY_FOR,
                            "send {random_id} still fails after {RETRY_FOR:?}: {status:?}"
                        );
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            self.sent
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .push(random_id);
            self.acked_at
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .push(Instant::now());
            // A steady stream, not a flood: the two cores also run Postgres and six services.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Acknowledgements per second between `from` and `to`.
    fn rate_between(&self, from: Instant, to: Instant) -> anyhow::Result<f64> {
        let acked = self
            .acked_at
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .iter()
            .filter(|at| **at >= from && **at < to)
            .count();
        Ok(acked as f64 / (to - from).as_secs_f64())
    }

    async fn finish(
        &self,
        senders: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
    ) -> anyhow::Result<(Vec<Failure>, Vec<i64>)> {
        self.stop.cancel();
        for sender in senders {
            sender.await??;
        }
        let failures = std::mem::take(
            &mut *self
                .failures
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?,
        );
        let sent = std::mem::take(&mut *self.sent.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
        Ok((failures, sent))
    }
}

/// Every failure must tell the client to retry: UNAVAILABLE with SERVICE_UNAVAILABLE, never
/// INTERNAL.
fn assert_all_retryable(failures: &[Failure]) {
    let wrong: Vec<&Failure> = failures
        .iter()
        .filter(|f| {
            f.code != Code::Unavailable || f.stable.as_deref() != Some("SERVICE_UNAVAILABLE")
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {} failed sends did not answer UNAVAILABLE/SERVICE_UNAVAILABLE: {wrong:#?}",
        wrong.len(),
        failures.len()
    );
}

/// Each acknowledged send is stored exactly once, retries included.
async fn assert_stored_once(system: &System, sent: &[i64]) -> anyhow::Result<()> {
    let mut db = system.db().await?;
    let duplicated: Vec<(String, i64)> = sqlx::query_as(
        "SELECT text, count(*) FROM messages.message_bodies GROUP BY text HAVING count(*) > 1",
    )
    .fetch_all(&mut db)
    .await?;
    assert!(
        duplicated.is_empty(),
        "stored more than once: {duplicated:?}"
    );
    let stored: Vec<String> = sqlx::query_scalar("SELECT text FROM messages.message_bodies")
        .fetch_all(&mut db)
        .await?;
    let stored: std::collections::HashSet<String> = stored.into_iter().collect();
    let missing: Vec<i64> = sent
        .iter()
        .filter(|id| !stored.contains(&format!("m{id}")))
        .copied()
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged but not stored: {missing:?}"
    );
    Ok(())
}

/// Postgres restarts under a steady stream of sends (`pg_ctl restart -m immediate`): the sends
/// it breaks answer UNAVAILABLE, and once it accepts connections again no call fails: the
/// pools test the connections that were idle across the restart instead of handing them out.
mod postgres_restart {
    use super::*;

    #[tokio::test]
    async fn costs_at_most_the_sends_in_flight() -> anyhow::Result<()> {
        let system = System::start_private(Mode::Processes).await?;
        let mut alice = system.device().await?;
        alice.sign_up("15550401", "Alice").await?;
        let mut bob = system.device().await?;
        let bob_id = bob.sign_up("15550402", "Bob").await?.id;
        let alice = Arc::new(alice);

        let (traffic, senders) = Traffic::start(alice.clone(), bob_id);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let restart_at = Instant::now();
        system.restart_postgres().await?;
        let back_at = Instant::now();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (failures, sent) = traffic.finish(senders).await?;

        let failed_after: Vec<&Failure> = failures.iter().filter(|f| f.ended >= back_at).collect();
        let started_after: Vec<&Failure> =
            failures.iter().filter(|f| f.started >= back_at).collect();
        eprintln!(
            "faults: Postgres restart took {:?}; {} sends acknowledged, {} failed calls in all ({} distinct sends); \
             after Postgres accepted connections again: {} failed calls ended, {} of them started then",
            back_at - restart_at,
            sent.len(),
            failures.len(),
            failures
                .iter()
                .map(|f| f.random_id)
                .collect::<std::collections::HashSet<_>>()
                .len(),
            failed_after.len(),
            started_after.len(),
        );
        assert_all_retryable(&failures);
        assert!(
            started_after.is_empty(),
            "calls begun after Postgres was back failed: {started_after:#?}"
        );
        assert!(
            failed_after.len() <= SENDERS as usize,
            "more calls failed after Postgres was back than were in flight: {failed_after:#?}"
        );
        assert_stored_once(&system, &sent).await
    }
}

/// svc-messages is killed (SIGKILL) while sends are in flight: every send that fails answers
/// UNAVAILABLE, and its retry with the same random_id after messages restarted stores the
/// message exactly once.
mod messages_crash {
    use oxigram::Target;

    use super::*;

    #[tokio::test]
    async fn failed_sends_are_retryable_and_stored_once() -> anyhow::Result<()> {
        let mut system = System::start_private(Mode::Processes).await?;
        let mut alice = system.device().await?;
        alice.sign_up("15550501", "Alice").await?;
        let mut bob = system.device().await?;
        let bob_id = bob.sign_up("15550502", "Bob").await?.id;
        let alice = Arc::new(alice);

        let (traffic, senders) = Traffic::start(alice.clone(), bob_id);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let killed_at = Instant::now();
        system.stop_service(Target::Messages).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        system.start_service(Target::Messages)?;
        system.wait_serving(Target::Messages).await?;
        let back_at = Instant::now();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (failures, sent) = traffic.finish(senders).await?;

        // The calls that were inside messages when it died (the others could not connect).
        let in_flight: Vec<&Failure> = failures
            .iter()
            .filter(|f| f.started <= killed_at && f.ended >= killed_at)
            .collect();
        eprintln!(
            "faults: messages killed and back in {:?}; {} sends acknowledged, {} failed calls in all, \
             {} of them in flight at the kill: {:?}",
            back_at - killed_at,
            sent.len(),
            failures.len(),
            in_flight.len(),
            in_flight
                .iter()
                .map(|f| f.message.as_str())
                .collect::<Vec<_>>(),
        );
        assert_all_retryable(&failures);
        assert!(
            !failures.is_empty(),
            "no send failed: the kill came between sends"
        );
        assert_stored_once(&system, &sent).await?;

        // The sends that failed were retried after messages came back: each once in history.
        let retried: std::collections::HashSet<i64> =
            failures.iter().map(|f| f.random_id).collect();
        let history = alice.history(bob_id).await?;
        for message in &history {
            let count = history.iter().filter(|m| m.text == message.text).count();
            assert_eq!(count, 1, "{} is in the history {count} times", message.text);
        }
        let newest_retried = retried.iter().max().copied().context("no retried send")?;
        assert!(
            sent.contains(&newest_retried),
            "the retried send {newest_retried} was acknowledged"
        );
        Ok(())
    }
}

/// Redis hangs for 10 s (a proxy between the services and Redis stops forwarding, connections
/// open): no send waits on it longer than the call budget, the breakers open and sends go on
/// at no less than half the rate before, and every acknowledged message still reaches Bob's
/// open stream once Redis answers again.
mod redis_hang {
    use std::collections::HashSet;

    use oxigram_tests::proxy::{HangingProxy, split_redis_url};

    use super::*;

    #[tokio::test]
    async fn sends_keep_half_their_rate_and_nothing_is_lost() -> anyhow::Result<()> {
        const HANG: Duration = Duration::from_secs(10);
        let (mut config, ground) = System::config().await?;
        let (redis_addr, db) =
            split_redis_url(config.redis_url.as_deref().context("no Redis URL")?).await?;
        let proxy = HangingProxy::start(redis_addr).await?;
        config.redis_url = Some(format!("redis://{}{db}", proxy.addr));
        let system = System::start_with(config, ground, Mode::Processes).await?;
        let mut alice = system.device().await?;
        alice.sign_up("15550601", "Alice").await?;
        let mut bob = system.device().await?;
        let bob_id = bob.sign_up("15550602", "Bob").await?.id;
        let mut stream = bob.stream(0).await?;
        let alice = Arc::new(alice);

        let (traffic, senders) = Traffic::start(alice.clone(), bob_id);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let steady_from = Instant::now();
        tokio::time::sleep(Duration::from_secs(4)).await;
        let hang_at = Instant::now();
        proxy.hang();
        tokio::time::sleep(HANG).await;
        proxy.resume();
        let resumed_at = Instant::now();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = traffic.rate_between(steady_from, hang_at)?;
        let during = traffic.rate_between(hang_at, resumed_at)?;
        let (failures, sent) = traffic.finish(senders).await?;

        // Every acknowledged message reaches Bob's stream, pushed once routes are back.
        let mut missing: HashSet<String> = sent.iter().map(|id| format!("m{id}")).collect();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !missing.is_empty() && Instant::now() < deadline {
            let left = deadline - Instant::now();
            match next_message(&mut stream, left).await {
                Ok(text) => {
                    missing.remove(&text);
                }
                Err(_) => break,
            }
        }
        let streamed_all_after = resumed_at.elapsed();
        eprintln!(
            "faults: Redis hung {HANG:?}: {} sends acknowledged, {} failed calls; {before:.1} sends/s \
             before, {during:.1} sends/s during the hang ({:.0} %); {} acknowledged messages not on \
             Bob's stream {streamed_all_after:?} after Redis answered again",
            sent.len(),
            failures.len(),
            100.0 * during / before.max(f64::MIN_POSITIVE),
            missing.len(),
        );
        assert_all_retryable(&failures);
        assert!(
            during >= 0.5 * before,
            "sends fell to {during:.1}/s while Redis hung, from {before:.1}/s"
        );
        assert!(
            missing.is_empty(),
            "never streamed to Bob: {} messages",
            missing.len()
        );
        assert_stored_once(&system, &sent).await
    }
}
