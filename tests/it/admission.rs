//! Admission control under a burst larger than a service takes at once: the excess is shed
//! with RESOURCE_EXHAUSTED / FLOOD_WAIT_X (nothing else fails), each shed send retried with its
//! random_id is stored once, and the refusals are counted.

use std::{collections::HashSet, sync::Arc, time::Duration};

use oxigram_tests::{Mode, System, client::code};
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_limit_is_shed_with_flood_wait_and_retried() -> anyhow::Result<()> {
    const BURST: i64 = 60;
    let (mut config, ground) = System::config().await?;
    config.admission.max_in_flight = 4;
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15559101", "Alice"), ("15559102", "Bob")])
        .await?;
    let bob_id = bob.user_id()?;
    let alice = Arc::new(alice);

    let sends = (1..=BURST).map(|random_id| {
        let alice = alice.clone();
        async move {
            let mut shed = 0;
            loop {
                match alice
                    .send(bob_id, random_id, &format!("b{random_id}"))
                    .await
                {
                    Ok(_) => return Ok::<_, anyhow::Error>(shed),
                    Err(status) => {
                        let stable = code(&status).unwrap_or_default();
                        anyhow::ensure!(
                            status.code() == Code::ResourceExhausted
                                && stable.starts_with("FLOOD_WAIT_"),
                            "send {random_id}: {status:?}"
                        );
                        shed += 1;
                        anyhow::ensure!(shed < 200, "send {random_id} shed {shed} times");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }
    });
    let mut shed = 0;
    for outcome in futures::future::join_all(sends).await {
        shed += outcome?;
    }
    eprintln!("admission: {BURST} sends at once past a limit of 4: {shed} refusals, all retried");
    assert!(shed > 0, "nothing was shed");

    let history = bob.history(alice.user_id()?).await?;
    let texts: HashSet<&str> = history.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(history.len(), BURST as usize, "no send stored twice");
    assert_eq!(texts.len(), BURST as usize, "every send stored");
    let metrics = oxigram_telemetry::metrics::render();
    assert!(
        metrics.contains(r#"oxigram_admission_shed_total{service="gateway",priority="persist"}"#),
        "the refusals are counted"
    );
    Ok(())
}
