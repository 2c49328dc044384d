//! A reconnect storm against a gateway that catches up one device at a time: every device
//! behind reopens its stream at once. With a line the ones past the cap wait in it, open,
//! and are served in turn; without one (or past it) they are told to come back at their turn
//! (never an error, and never counted against the device's limit of openings). Either way
//! every device converges to the account's pts.

use std::time::Duration;

use oxigram_client::{Client, Event, State, StreamOptions, UpdateStream};
use oxigram_tests::{Mode, System};

const DEVICES: usize = 12;
const MISSED: i64 = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_storm_is_served_in_paced_waves_and_every_device_converges()
-> anyhow::Result<()> {
    let outcomes = storm(0).await?;
    let waits: Vec<Duration> = outcomes.iter().flat_map(|w| w.clone()).collect();
    assert!(
        !waits.is_empty(),
        "one slot and no line for {DEVICES} devices: some were paced"
    );
    // Each is told its turn in the queue, never sooner than retry_after_ms; a queue of
    // twelve catch-ups of forty updates is a few seconds at most.
    assert!(
        waits
            .iter()
            .all(|w| (Duration::from_millis(50)..Duration::from_secs(5)).contains(w)),
        "waits of at least retry_after_ms, at a turn within the queue: {waits:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_line_a_reconnect_storm_waits_its_turn_without_asking_again() -> anyhow::Result<()> {
    let outcomes = storm(DEVICES).await?;
    assert!(
        outcomes.iter().all(Vec::is_empty),
        "one slot, and a place in line for every device: none was sent away: {outcomes:?}"
    );
    Ok(())
}

/// Every device reopens at once against a gateway of one catch-up slot and a line of `line`
/// places, and converges; the waits each device was told.
async fn storm(line: usize) -> anyhow::Result<Vec<Vec<Duration>>> {
    let (mut config, ground) = System::config().await?;
    config.streams.max_concurrent_catch_up = 1;
    config.streams.catch_up_line = line;
    config.streams.retry_after_ms = 50;
    // One opening a device: an opening turned away at the cap must not count against it.
    config.limits.stream_opens_per_device = 1;
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15559401", "Alice"), ("15559402", "Bob")])
        .await?;
    let alice_id = alice.user_id()?;
    let mut devices = Vec::with_capacity(DEVICES);
    for _ in 0..DEVICES {
        let mut device = system.device().await?;
        device.sign_in("15559401").await?;
        devices.push(device);
    }
    // The devices have seen one message: they resume from a pts of their own (a stream
    // opened at pts 0 is live only and replays nothing).
    bob.send(alice_id, 8_999, "before").await?;
    let start = oxigram_tests::eventually(Duration::from_secs(10), "the first message", || async {
        let pts = alice.difference(0).await?.state.map_or(0, |s| s.pts);
        Ok((pts > 0).then_some(pts))
    })
    .await?;
    for i in 0..MISSED {
        bob.send(alice_id, 9_000 + i, &format!("while away {i}"))
            .await?;
    }
    let target = oxigram_tests::eventually(Duration::from_secs(10), "alice's log", || async {
        let pts = alice.difference(0).await?.state.map_or(0, |s| s.pts);
        Ok((i64::from(pts - start) >= MISSED).then_some(pts))
    })
    .await?;

    // Every device was at `start` and reopens at once.
    let options = StreamOptions {
        gap_wait: Duration::from_secs(30),
        ..StreamOptions::default()
    };
    let storm = devices.iter().map(|device| {
        let client = Client::clone(device);
        async move {
            let saved = State {
                pts: start,
                date: 0,
            };
            let mut updates = UpdateStream::open(client, saved, options).await?;
            let mut paced_waits = Vec::new();
            while updates.state().pts < target {
                let event = tokio::time::timeout(Duration::from_secs(20), updates.next()).await?;
                match event {
                    Event::Paced { retry_in } => paced_waits.push(retry_in),
                    Event::Failed { during, error } => {
                        anyhow::bail!("a device failed ({during:?}): {error}")
                    }
                    Event::TooLong { pts } => anyhow::bail!("too long at {pts}"),
                    _ => {}
                }
            }
            anyhow::ensure!(updates.stats().paced as usize == paced_waits.len());
            anyhow::Ok((updates.state().pts, paced_waits))
        }
    });
    let outcomes = futures::future::try_join_all(storm).await?;
    assert!(
        outcomes.iter().all(|(pts, _)| *pts == target),
        "every device converged to {target}: {outcomes:?}"
    );

    // The storm over, its slot is free again: one caller at a time is always served.
    for device in &devices {
        device.difference(start).await?;
    }
    Ok(outcomes.into_iter().map(|(_, waits)| waits).collect())
}
