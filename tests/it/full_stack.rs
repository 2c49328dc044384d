//! The six services as separate containers (image `oxigram:local`) on a private Docker network
//! with Postgres and Redis containers. Messages flow through the gateway while dispatch and
//! then updates are stopped and started again mid-traffic: nothing is lost and every device
//! converges.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context;
use oxigram_proto::{
    api::v1::stream_event,
    types::v1::{PtsUpdate, update},
};
use oxigram_tests::TestClient;
use testcontainers_modules::{
    postgres::Postgres,
    redis::Redis,
    testcontainers::{
        ContainerAsync, GenericImage, ImageExt,
        core::{IntoContainerPort, WaitFor},
        runners::AsyncRunner,
    },
};

const SERVICES: [(&str, u16); 6] = [
    ("media", 7715),
    ("dispatch", 7714),
    ("updates", 7712),
    ("dialogs", 7713),
    ("messages", 7711),
    ("gateway", 7710),
];

/// What one device applied, by the client rules: contiguous pts only, gaps filled by
/// getDifference when they persist (after 1 s, as Telegram's clients do).
#[derive(Default)]
struct Applied {
    pts: i32,
    messages: BTreeSet<String>,
}

fn note(applied: &mut Applied, u: &PtsUpdate) {
    if let Some(update::Kind::NewMessage(n)) = u.update.as_ref().and_then(|u| u.kind.as_ref())
        && let Some(m) = &n.message
    {
        applied.messages.insert(m.text.clone());
    }
}

async fn catch_up(client: &TestClient, applied: &Mutex<Applied>) -> anyhow::Result<()> {
    let from = applied.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.pts;
    let (slices, pts) = client.full_difference(from).await?;
    let mut a = applied.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    for d in &slices {
        for m in &d.new_messages {
            a.messages.insert(m.text.clone());
        }
    }
    a.pts = a.pts.max(pts);
    Ok(())
}

/// An online device: applies its stream, and catches up when a gap lasts.
fn online(
    client: TestClient,
) -> (
    Arc<Mutex<Applied>>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let applied = Arc::new(Mutex::new(Applied::default()));
    let state = applied.clone();
    let task = tokio::spawn(async move {
        let outcome = follow(&client, &state).await;
        if let Err(err) = &outcome {
            eprintln!("full stack: device task failed: {err:#}");
        }
        outcome
    });
    (applied, task)
}

/// Applies one device's stream until the test ends.
async fn follow(client: &TestClient, state: &Mutex<Applied>) -> anyhow::Result<()> {
    let mut stream = client.stream(0).await?;
    let mut gap_since: Option<tokio::time::Instant> = None;
    loop {
        let next = tokio::time::timeout(Duration::from_millis(300), stream.message()).await;
        match next {
            Ok(Ok(Some(event))) => match event.kind {
                Some(stream_event::Kind::Update(u)) => {
                    let mut a = state.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                    if u.pts - u.pts_count == a.pts {
                        note(&mut a, &u);
                        a.pts = u.pts;
                        gap_since = None;
                    } else if u.pts > a.pts {
                        gap_since.get_or_insert_with(tokio::time::Instant::now);
                    }
                }
                Some(stream_event::Kind::DifferenceNeeded(_)) => {
                    gap_since.get_or_insert_with(tokio::time::Instant::now);
                }
                None => {}
            },
            Ok(Ok(None)) | Ok(Err(_)) => {
                // The gateway stays up in this test; a broken stream is a failure.
                anyhow::bail!("the update stream ended");
            }
            Err(_) => {}
        }
        if gap_since.is_some_and(|t| t.elapsed() > Duration::from_secs(1)) {
            // While updates is down the difference fails too: a client tries again later.
            match catch_up(client, state).await {
                Ok(()) => gap_since = None,
                Err(err) => {
                    eprintln!("full stack: catch-up failed, retrying: {err:#}");
                    gap_since = Some(tokio::time::Instant::now());
                }
            }
        }
    }
}

async fn service(
    name: &str,
    port: u16,
    network: &str,
    suffix: &str,
    env: &[(String, String)],
) -> anyhow::Result<ContainerAsync<GenericImage>> {
    let mut image = GenericImage::new("oxigram", "local")
        .with_wait_for(WaitFor::message_on_stderr("service ready"))
        .with_exposed_port(port.tcp())
        .with_cmd(["serve", "--target", name])
        .with_network(network)
        .with_container_name(format!("{name}-{suffix}"))
        .with_startup_timeout(Duration::from_secs(120));
    for (k, v) in env {
        image = image.with_env_var(k, v);
    }
    let container = image.start().await.with_context(|| {
        format!("cannot start {name} from oxigram:local (scripts/build-images)")
    })?;
    eprintln!(
        "full stack: {name} container {} from oxigram:local",
        &container.id()[..12]
    );
    Ok(container)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_survive_dispatch_and_updates_restarts() -> anyhow::Result<()> {
    let suffix = format!(
        "{}-{:06x}",
        std::process::id(),
        rand::random::<u32>() & 0xff_ffff
    );
    let network = format!("oxigram-fs-{suffix}");
    let postgres = Postgres::default()
        .with_name("oxigram-postgres")
        .with_tag("local")
        .with_network(&network)
        .with_container_name(format!("pg-{suffix}"))
        .with_cmd(["postgres", "-c", "max_connections=300"])
        .start()
        .await?;
    let redis = Redis::default()
        .with_name("oxigram-redis")
        .with_tag("local")
        .with_network(&network)
        .with_container_name(format!("redis-{suffix}"))
        .start()
        .await?;
    eprintln!(
        "full stack: postgres {} and redis {} from the local images on network {network}",
        &postgres.id()[..12],
        &redis.id()[..12]
    );

    let mut env: Vec<(String, String)> = vec![
        (
            "OXIGRAM_DATABASE_URL".into(),
            format!("postgres://postgres:postgres@pg-{suffix}:5432/postgres"),
        ),
        (
            "OXIGRAM_REDIS_URL".into(),
            format!("redis://redis-{suffix}:6379"),
        ),
        (
            "OXIGRAM_GATEWAY__FIXED_LOGIN_CODE".into(),
            format!("\"{}\"", oxigram_tests::LOGIN_CODE),
        ),
        ("OXIGRAM_GATEWAY__SENDS_PER_MINUTE".into(), "100000".into()),
        ("OXIGRAM_OUTBOX__POLL_MS".into(), "200".into()),
        ("OXIGRAM_OUTBOX__BACKOFF_MAX_MS".into(), "1000".into()),
        ("OXIGRAM_RPC_TIMEOUT_MS".into(), "3000".into()),
        ("OXIGRAM_DB_POOL_SIZE".into(), "8".into()),
    ];
    for (name, port) in SERVICES {
        let upper = name.to_uppercase();
        env.push((
            format!("OXIGRAM_SERVICES__{upper}__LISTEN"),
            format!("0.0.0.0:{port}"),
        ));
        env.push((
            format!("OXIGRAM_SERVICES__{upper}__ENDPOINT"),
            format!("http://{name}-{suffix}:{port}"),
        ));
    }
    let mut containers = Vec::new();
    for (name, port) in SERVICES {
        containers.push((name, service(name, port, &network, &suffix, &env).await?));
    }
    let container = |wanted: &str| {
        containers
            .iter()
            .find(|(n, _)| *n == wanted)
            .map(|(_, c)| c)
            .context("no such service")
    };
    let gateway_port = container("gateway")?.get_host_port_ipv4(7710).await?;
    let gateway = format!("http://127.0.0.1:{gateway_port}");

    let mut alice = TestClient::new(&gateway).await?;
    alice.sign_up("15559001", "Alice").await?;
    let mut alice_tablet = TestClient::new(&gateway).await?;
    alice_tablet.sign_in("15559001").await?;
    let mut bob_phone = TestClient::new(&gateway).await?;
    let bob_id = bob_phone.sign_up("15559002", "Bob").await?.id;
    let mut bob_laptop = TestClient::new(&gateway).await?; // offline until the end
    bob_laptop.sign_in("15559002").await?;
    let (tablet_applied, tablet_task) = online(alice_tablet);
    let (phone_applied, phone_task) = online(bob_phone);
    tokio::time::sleep(Duration::from_millis(500)).await; // streams registered

    const N: usize = 60;
    let mut sent = BTreeSet::new();
    for i in 0..N {
        match i {
            12 => container("dispatch")?.stop().await?,
            24 => container("dispatch")?.start().await?,
            36 => container("updates")?.stop().await?,
            48 => container("updates")?.start().await?,
            _ => {}
        }
        let text = format!("message {i:02}");
        alice
            .send(bob_id, 1 + i as i64, &text)
            .await
            .with_context(|| format!("send {i} was not PERSISTED"))?;
        sent.insert(text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let count = |a: &Arc<Mutex<Applied>>| a.lock().map(|a| a.messages.len()).unwrap_or(0);
    while (count(&tablet_applied) < N || count(&phone_applied) < N)
        && tokio::time::Instant::now() < deadline
    {
        for task in [&tablet_task, &phone_task] {
            anyhow::ensure!(
                !task.is_finished(),
                "a device task stopped (its error is above)"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let laptop = Mutex::new(Applied::default());
    catch_up(&bob_laptop, &laptop).await?;
    let by_diff = alice.full_difference(0).await?.0;
    let alice_own: BTreeSet<String> = by_diff
        .iter()
        .flat_map(|d| d.new_messages.iter().map(|m| m.text.clone()))
        .collect();

    let report = [
        ("alice (sender, getDifference)", alice_own),
        (
            "alice-tablet (stream)",
            tablet_applied
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .messages
                .clone(),
        ),
        (
            "bob-phone (stream)",
            phone_applied
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .messages
                .clone(),
        ),
        (
            "bob-laptop (offline, getDifference)",
            laptop
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .messages
                .clone(),
        ),
    ];
    println!("full stack: sent {} messages", sent.len());
    for (device, got) in &report {
        println!("full stack: {device}: received {}", got.len());
    }
    for (device, got) in &report {
        assert_eq!(
            got, &sent,
            "{device} converged to exactly the messages sent"
        );
    }
    tablet_task.abort();
    phone_task.abort();
    drop(containers);
    drop((postgres, redis));
    Ok(())
}
