//! The six services as separate containers (image `oxigram:local`) on a private Docker network
//! with Postgres and Redis containers. Messages flow through the gateway while dispatch and
//! then updates are stopped and started again mid-traffic: nothing is lost and every device
//! converges.

use std::{collections::BTreeSet, convert::Infallible, time::Duration};

use anyhow::Context;
use oxigram_client::{
    CatchUp, Client, During, Event, Sequencer, State, StreamOptions, StreamStats, UpdateStream,
};
use oxigram_proto::types::v1::{PtsUpdate, update};
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
use tokio::sync::watch;

const SERVICES: [(&str, u16); 6] = [
    ("media", 7715),
    ("dispatch", 7714),
    ("updates", 7712),
    ("dialogs", 7713),
    ("messages", 7711),
    ("gateway", 7710),
];

/// The text of a new message update.
fn message_text(u: &PtsUpdate) -> Option<String> {
    match u.update.as_ref()?.kind.as_ref()? {
        update::Kind::NewMessage(n) => n.message.as_ref().map(|m| m.text.clone()),
        _ => None,
    }
}

/// What an online device has applied so far.
#[derive(Clone, Default)]
struct Received {
    messages: BTreeSet<String>,
    stats: StreamStats,
}

/// An online device: follows its update stream by the client's rules (`UpdateStream`: the
/// live stream in pts order, gaps filled by getDifference after the gap wait, a failed
/// catch-up retried), publishing what it applied.
fn online(
    device: &TestClient,
) -> (
    watch::Receiver<Received>,
    tokio::task::JoinHandle<anyhow::Result<Infallible>>,
) {
    let (received, watching) = watch::channel(Received::default());
    let client = Client::clone(device);
    let task = tokio::spawn(async move {
        let outcome = follow(client, &received).await;
        if let Err(err) = &outcome {
            eprintln!("full stack: device task failed: {err:#}");
        }
        outcome
    });
    (watching, task)
}

/// Applies one device's stream until the test ends.
async fn follow(client: Client, received: &watch::Sender<Received>) -> anyhow::Result<Infallible> {
    let options = StreamOptions {
        gap_wait: Duration::from_secs(1),
        // The gateway stays up in this test: a lost stream is a failure, not something to
        // reconnect from.
        max_reconnects: Some(0),
        ..StreamOptions::default()
    };
    let mut updates = UpdateStream::open(client, State::default(), options).await?;
    loop {
        match updates.next().await {
            Event::Update(applied) => {
                let stats = updates.stats();
                received.send_modify(|r| {
                    r.messages.extend(message_text(&applied.update));
                    r.stats = stats;
                });
            }
            Event::Failed {
                during: During::CatchUp,
                error,
            } => {
                // While updates is down the difference fails too: the stream retries it after
                // another gap wait.
                eprintln!("full stack: catch-up failed, retrying: {error}");
            }
            Event::Failed { during, error } => {
                anyhow::bail!("the update stream failed ({during:?}): {error}")
            }
            Event::TooLong { pts } => {
                anyhow::bail!("the difference was too long to replay (state jumped to {pts})")
            }
            Event::Gap { .. }
            | Event::Resumed { .. }
            | Event::Paced { .. }
            | Event::Typing(_)
            | Event::Status(_)
            | Event::User(_) => {}
        }
    }
}

/// The messages of every update after pts 0, by getDifference slice after slice, as a device
/// that was offline all along applies them.
async fn catch_up(device: &TestClient) -> anyhow::Result<BTreeSet<String>> {
    let mut seq = Sequencer::new(State::default());
    let mut messages = BTreeSet::new();
    let outcome = device
        .catch_up(&mut seq, |u, _| messages.extend(message_text(&u)))
        .await?;
    anyhow::ensure!(
        outcome == CatchUp::Done,
        "the difference was too long to replay: {outcome:?}"
    );
    anyhow::ensure!(
        seq.discontinuities() == 0,
        "the update log has {} holes",
        seq.discontinuities()
    );
    Ok(messages)
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
    let (tablet_received, tablet_task) = online(&alice_tablet);
    let (phone_received, phone_task) = online(&bob_phone);
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
    let mut online_devices = [
        ("alice-tablet (stream)", tablet_received, tablet_task),
        ("bob-phone (stream)", phone_received, phone_task),
    ];
    for (device, received, task) in &mut online_devices {
        let all = tokio::time::timeout_at(deadline, received.wait_for(|r| r.messages.len() >= N));
        if let Ok(Err(_)) = all.await {
            // The task dropped its sender: it failed.
            match task.await? {
                Ok(never) => match never {},
                Err(err) => return Err(err.context(format!("{device} stopped"))),
            }
        }
    }
    let laptop = catch_up(&bob_laptop).await?;
    let alice_own = catch_up(&alice).await?;

    let mut report = vec![("alice (sender, getDifference)", alice_own)];
    for (device, received, _) in &online_devices {
        let received = received.borrow();
        println!("full stack: {device}: {:?}", received.stats);
        report.push((*device, received.messages.clone()));
    }
    report.push(("bob-laptop (offline, getDifference)", laptop));
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
    for (_, _, task) in &online_devices {
        task.abort();
    }
    drop(containers);
    drop((postgres, redis));
    Ok(())
}
