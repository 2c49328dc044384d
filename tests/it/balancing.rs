//! Client-side balancing: two replicas of one service, separate processes behind one name
//! (listed in a hosts file, as a headless Service's DNS name lists its pods), both get calls,
//! and a replica stopped with SIGTERM loses none: it turns NOT_SERVING, callers drop it at
//! their next refresh, and it stops taking calls only after its drain time.

use std::{net::SocketAddr, path::Path, time::Duration};

use oxigram::Target;
use oxigram_tests::{System, free_port};

const NAME: &str = "messages.balancing.test";

/// Calls a replica answered, read from its log (tower-http logs every finished request at
/// debug level, inside the request's span, which names the method); health checks aside.
fn calls_served(log: &Path) -> anyhow::Result<usize> {
    Ok(std::fs::read_to_string(log)?
        .lines()
        .filter(|line| line.contains("finished processing request"))
        .filter(|line| !line.contains("grpc.health"))
        .count())
}

#[tokio::test]
async fn calls_spread_over_replicas_and_a_stopping_one_loses_none() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    let port = free_port()?;
    let hosts = ground.dir.join("hosts");
    std::fs::write(&hosts, format!("127.0.0.2 {NAME}\n127.0.0.3 {NAME}\n"))?;
    config.services.messages.endpoint = format!("http://{NAME}:{port}");
    config.balancing.hosts_file = Some(hosts);
    config.balancing.endpoint_refresh_ms = 200;
    config.balancing.shutdown_drain_ms = 2_000;
    config.telemetry.log_filter = "info,sqlx=warn,tower_http=debug".into();
    let listens = [
        SocketAddr::from(([127, 0, 0, 2], port)),
        SocketAddr::from(([127, 0, 0, 3], port)),
    ];
    let (system, mut replicas) =
        System::start_replicas(config, ground, Target::Messages, &listens).await?;
    let [alice, bob, carol, dave] = system
        .users([
            ("15557101", "Alice"),
            ("15557102", "Bob"),
            ("15557103", "Carol"),
            ("15557104", "Dave"),
        ])
        .await?;
    let bob_id = bob.user_id()?;

    // The gateway may have started before the second replica served: wait until it
    // balances over both (at most a refresh or two).
    tokio::time::sleep(Duration::from_millis(600)).await;
    for i in 0..30 {
        alice
            .send(bob_id, 1_000 + i, &format!("before {i}"))
            .await?;
    }
    let before: Vec<usize> = replicas
        .iter()
        .map(|r| calls_served(&r.log))
        .collect::<anyhow::Result<_>>()?;
    assert!(
        before.iter().all(|&n| n > 0),
        "every replica answers calls: {before:?}"
    );

    // Three users go on sending while the second replica stops; every send must be answered.
    let mut senders = Vec::new();
    for device in [alice, carol, dave] {
        senders.push(tokio::spawn(async move {
            let who = device.user_id()?;
            for i in 0..30 {
                device
                    .send(bob_id, 2_000 + i, &format!("during {i}"))
                    .await
                    .map_err(|status| anyhow::anyhow!("send {i} of {who} failed: {status:?}"))?;
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            anyhow::Ok(who)
        }));
    }
    tokio::time::sleep(Duration::from_millis(150)).await;
    replicas[1].stop().await?;
    let mut senders_ids = Vec::new();
    for sender in senders {
        senders_ids.push(sender.await??);
    }

    let survivor = calls_served(&replicas[0].log)?;
    assert!(
        survivor > before[0],
        "the remaining replica takes the calls: {survivor} after {before:?}"
    );
    for (who, expected) in senders_ids.into_iter().zip([60, 30, 30]) {
        let history = bob.history(who).await?;
        assert_eq!(
            history.len(),
            expected,
            "every message {who} sent is in Bob's history"
        );
    }
    Ok(())
}
