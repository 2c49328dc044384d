//! The metrics an operator scrapes, after real traffic through the gateway: each name the
//! alert rules and dashboards use is there, with the labels and counts the traffic implies.

use std::time::Duration;

use anyhow::Context;
use oxigram_tests::{Mode, System, eventually};

/// The value of the sample `series` (name and labels exactly as exposed), if present.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

#[tokio::test]
async fn traffic_shows_in_the_metrics() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let mut alice = system.device().await?;
    alice.sign_up("15550801", "Alice").await?;
    let mut bob = system.device().await?;
    let bob_id = bob.sign_up("15550802", "Bob").await?.id;
    let mut stream = bob.stream(0).await?;
    for random_id in 1..=3 {
        alice.send(bob_id, random_id, "counted").await?;
    }
    for _ in 0..3 {
        oxigram_tests::client::next_logged(&mut stream, Duration::from_secs(15))
            .await
            .context("no push")?;
    }
    // A send to nobody: refused with a stable code.
    let refused = alice.send(987_654_321, 4, "to nobody").await;
    assert!(refused.is_err(), "a send to no user is refused");
    bob.difference(0).await?;

    let wanted: [(&str, f64); 12] = [
        (
            r#"oxigram_rpc_requests_total{service="gateway",method="/oxigram.api.v1.Messages/SendMessage",code="OK"}"#,
            3.0,
        ),
        (
            r#"oxigram_rpc_requests_total{service="gateway",method="/oxigram.api.v1.Messages/SendMessage",code="INVALID_ARGUMENT"}"#,
            1.0,
        ),
        (
            r#"oxigram_rpc_requests_total{service="messages",method="/oxigram.messages.v1.Messages/SendMessage",code="OK"}"#,
            3.0,
        ),
        (
            r#"oxigram_rpc_duration_seconds_count{service="gateway",method="/oxigram.api.v1.Messages/SendMessage"}"#,
            4.0,
        ),
        (r#"oxigram_sends_total{result="ok"}"#, 3.0),
        (r#"oxigram_sends_total{result="PEER_ID_INVALID"}"#, 1.0),
        ("oxigram_send_duration_seconds_count", 4.0),
        ("oxigram_streams_open", 1.0),
        (r#"oxigram_pushes_total{result="delivered"}"#, 3.0),
        ("oxigram_difference_updates_count", 1.0),
        // Alice's first send asks Redis and brings back a lease; the sends after it are decided
        // on the instance while the lease lasts, which depends on how fast they come.
        (
            r#"oxigram_rate_limit_checks_total{rule="send",decided="redis"}"#,
            1.0,
        ),
        (r#"oxigram_redis_breaker_open{service="gateway"}"#, 0.0),
    ];
    let metrics = eventually(Duration::from_secs(10), "every metric", || async {
        let metrics = oxigram_telemetry::metrics::render();
        let pending = metrics.contains("oxigram_outbox_pending_rows{");
        let all = wanted
            .iter()
            .all(|(series, at_least)| sample(&metrics, series).is_some_and(|v| v >= *at_least));
        Ok((pending && all).then_some(metrics))
    })
    .await
    .map_err(|err| {
        let metrics = oxigram_telemetry::metrics::render();
        let missing: Vec<String> = wanted
            .iter()
            .filter(|(series, at_least)| !sample(&metrics, series).is_some_and(|v| v >= *at_least))
            .map(|(series, at_least)| {
                format!("{series} >= {at_least} (is {:?})", sample(&metrics, series))
            })
            .collect();
        err.context(format!("missing: {missing:#?}"))
    })?;
    // Exact where nothing else can add to the count.
    assert_eq!(
        sample(&metrics, r#"oxigram_sends_total{result="ok"}"#),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &metrics,
            r#"oxigram_rate_limit_degraded{service="gateway"}"#
        ),
        Some(0.0)
    );
    Ok(())
}
