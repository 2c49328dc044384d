//! Update streams: a resumed stream replays what the device missed, then says so with one
//! `caught_up` marker, then carries live updates.

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
