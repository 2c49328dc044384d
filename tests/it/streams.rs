//! Update streams: a resumed stream replays what the device missed, then says so with one
//! `caught_up` marker, then carries live updates; a stream idle past its timeout ends and its
//! client reopens it.

use std::time::Duration;

use anyhow::Context;
use oxigram_proto::api::v1::stream_event;
use oxigram_tests::{Mode, System, client::is_transient};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_stream_marks_the_end_of_its_replay() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15559201", "Alice"), ("15559202", "Bob")])
        .await?;
    let bob_id = bob.user_id()?;
    for random_id in 1..=3 {
        alice.send(bob_id, random_id, "missed").await?;
    }
    // Bob's device had applied pts 1: the replay brings 2 and 3, then the marker.
    let mut stream = bob.stream(1).await?;
    let mut seen = Vec::new();
    let marker = loop {
        let event = tokio::time::timeout(Duration::from_secs(15), stream.message())
            .await
            .context("nothing on the stream")??
            .context("the stream ended")?;
        if is_transient(&event) {
            continue;
        }
        match event.kind {
            Some(stream_event::Kind::Update(u)) => seen.push(u.pts),
            Some(stream_event::Kind::CaughtUp(c)) => break c.pts,
            other => anyhow::bail!("unexpected {other:?}"),
        }
    };
    assert_eq!(seen, [2, 3], "the replay, in order, before the marker");
    assert_eq!(marker, 3, "the marker names the pts the device now has");
    // Then live updates.
    alice.send(bob_id, 4, "live").await?;
    let live = oxigram_tests::client::next_update(&mut stream).await?;
    assert_eq!(live.pts, 4);
    Ok(())
}

/// A stream that sent nothing for `streams.idle_timeout_secs` ends cleanly; one that carries
/// updates does not; the client library reopens an ended one from its pts and misses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stream_ends_and_its_client_reopens_it() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.streams.idle_timeout_secs = 1;
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15559211", "Alice"), ("15559212", "Bob")])
        .await?;
    let bob_id = bob.user_id()?;

    // Kept busy (an update every 400 ms), a stream outlives the timeout...
    let mut busy = bob.stream(0).await?;
    let opened = std::time::Instant::now();
    for random_id in 1..=5 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        alice.send(bob_id, random_id, "keep busy").await?;
        oxigram_tests::client::next_update(&mut busy).await?;
    }
    assert!(opened.elapsed() > Duration::from_secs(2));
    // ...then, idle, it ends: a clean end of stream, about a second after its last event.
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match busy.message().await {
                Ok(Some(event)) if is_transient(&event) => continue,
                other => return other,
            }
        }
    })
    .await
    .context("the idle stream did not end")?;
    assert!(matches!(ended, Ok(None)), "a clean end, not {ended:?}");

    // The client library's stream reopens from its pts and gets what was sent meanwhile.
    let state = bob.get_state().await?.into();
    let mut updates = oxigram_client::UpdateStream::open(
        (*bob).clone(),
        state,
        oxigram_client::StreamOptions::default(),
    )
    .await?;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    alice.send(bob_id, 6, "after the idle end").await?;
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let oxigram_client::Event::Update(applied) = updates.next().await {
                return applied.update;
            }
        }
    })
    .await
    .context("nothing after the reopening")?;
    assert_eq!(got.pts, state.pts + 1, "the next update, none missed");
    assert!(updates.stats().reconnects >= 1, "the stream was reopened");
    Ok(())
}
