//! Typing and presence: transient events on the devices' streams, never in the update log,
//! getDifference or an outbox. Typing reaches the peer's online device at once (measured),
//! repeats are coalesced, it carries its expiry; refusals have stable codes. Presence goes
//! online with a stream and offline with a last seen once the last one closed, announced to
//! the online users who have a dialog with her, a burst of changes coalesced.

use std::time::Duration;

use anyhow::Context;
use oxigram_client::{Event, StatusChange, StreamOptions, Typing, UpdateStream};
use oxigram_proto::{
    api::v1::{BlockRequest, ResolvePhoneRequest, SetTypingRequest, StreamEvent, stream_event},
    types::v1::{
        InputPeer, PrivacyRule, SendMessageAction, UpdateUserTyping, privacy_rule,
        send_message_action::Kind, user_status,
    },
};
use oxigram_tests::{Mode, System, TestClient, client::code, eventually};
use sqlx::Row;
use tokio::time::Instant;
use tonic::Streaming;

fn action(kind: Kind, progress: i32) -> SendMessageAction {
    SendMessageAction {
        kind: kind as i32,
        progress,
    }
}

async fn set_typing(
    c: &TestClient,
    peer: InputPeer,
    a: SendMessageAction,
) -> Result<(), tonic::Status> {
    c.messages()
        .set_typing(SetTypingRequest {
            peer: Some(peer),
            action: Some(a),
        })
        .await
        .map(|_| ())
}

/// The next typing event on a raw stream within `within` (other transient events skipped).
async fn next_typing(
    stream: &mut Streaming<StreamEvent>,
    within: Duration,
) -> anyhow::Result<Option<UpdateUserTyping>> {
    let deadline = Instant::now() + within;
    loop {
        let event = match tokio::time::timeout_at(deadline, stream.message()).await {
            Err(_) => return Ok(None),
            Ok(event) => event?.context("the stream ended")?,
        };
        match event.kind {
            Some(stream_event::Kind::UserTyping(t)) => return Ok(Some(t)),
            Some(stream_event::Kind::UserStatus(_)) => {}
            other => anyhow::bail!("only transient events expected, got {other:?}"),
        }
    }
}

/// The count a `SELECT count(*)` finds in the test's database.
async fn count(system: &System, sql: &'static str) -> anyhow::Result<i64> {
    let mut db = system.db().await?;
    let row = sqlx::query(sql).fetch_one(&mut db).await?;
    Ok(row.try_get(0)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_reaches_the_peer_within_100_ms_and_is_never_logged() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob, carol] = system
        .users([
            ("15557101", "Alice"),
            ("15557102", "Bob"),
            ("15557103", "Carol"),
        ])
        .await?;
    let bob_id = bob.user_id()?;
    let mut bob_stream = bob.stream(0).await?;
    let mut carol_stream = carol.stream(0).await?;
    // Warm the path (connections, the block check's cache) with another peer first.
    set_typing(
        &alice,
        InputPeer::user(carol.user_id()?),
        action(Kind::Typing, 0),
    )
    .await?;
    next_typing(&mut carol_stream, Duration::from_secs(5))
        .await?
        .context("Carol saw no typing")?;
    // Each kind in turn: a change of action is pushed at once.
    let kinds = [
        action(Kind::Typing, 0),
        action(Kind::RecordAudio, 0),
        action(Kind::UploadPhoto, 40),
        action(Kind::ChooseSticker, 0),
        action(Kind::Typing, 0),
    ];
    let mut took = Vec::new();
    for a in kinds {
        let start = Instant::now();
        set_typing(&alice, InputPeer::user(bob_id), a).await?;
        let typing = next_typing(&mut bob_stream, Duration::from_secs(1))
            .await?
            .context("Bob saw no typing within a second")?;
        took.push(start.elapsed());
        assert_eq!(typing.user_id, alice.user_id()?);
        assert_eq!(typing.action, Some(a));
        assert!(
            (4_000..=6_000).contains(&typing.timeout_ms),
            "it shows for about 6 s: {}",
            typing.timeout_ms
        );
    }
    println!("typing from SetTyping to the peer's stream: {took:?}");
    for (a, push) in kinds.iter().zip(&took) {
        assert!(
            *push <= Duration::from_millis(100),
            "{a:?} took {push:?} to reach Bob (each: {took:?})"
        );
    }

    // Nothing of it was logged: no update, no difference, no outbox row, no push job.
    for device in [&alice, &bob, &carol] {
        let difference = device.difference(0).await?;
        assert!(difference.updates.is_empty(), "{difference:?}");
        assert_eq!(difference.state.map(|s| s.pts), Some(0));
    }
    for sql in [
        "SELECT count(*) FROM updates.update_log",
        "SELECT count(*) FROM dispatch.outbox",
        "SELECT count(*) FROM messages.outbox",
    ] {
        assert_eq!(count(&system, sql).await?, 0, "{sql}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_repeats_are_coalesced_and_expire() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15557201", "Alice"), ("15557202", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    let state = bob.get_state().await?.into();
    let mut bob_updates =
        UpdateStream::open((*bob).clone(), state, StreamOptions::default()).await?;

    // A client repeating "typing" every 250 ms for 3.5 s: 15 calls, pushed at 0 and at 3 s.
    let start = Instant::now();
    let repeat = async {
        for i in 0..15u32 {
            tokio::time::sleep_until(start + Duration::from_millis(250) * i).await;
            set_typing(&alice, InputPeer::user(bob_id), action(Kind::Typing, 0)).await?;
        }
        anyhow::Ok(())
    };
    let watch = async {
        let mut seen: Vec<(Duration, Typing)> = Vec::new();
        while start.elapsed() < Duration::from_millis(4_500) {
            let next =
                tokio::time::timeout_at(start + Duration::from_millis(4_500), bob_updates.next())
                    .await;
            match next {
                Ok(Event::Typing(t)) => seen.push((start.elapsed(), t)),
                Ok(Event::Status(_)) => {}
                Ok(other) => anyhow::bail!("only transient events expected, got {other:?}"),
                Err(_) => break,
            }
        }
        anyhow::Ok(seen)
    };
    let (repeated, seen) = tokio::join!(repeat, watch);
    repeated?;
    let seen = seen?;
    let at: Vec<Duration> = seen.iter().map(|(at, _)| *at).collect();
    assert_eq!(seen.len(), 2, "15 calls, 2 pushes: {at:?}");
    assert!(at[1] >= Duration::from_secs(3), "{at:?}");
    // Each shows for about 6 s from its arrival, then expires on its own.
    let (at, first) = &seen[0];
    assert_eq!(first.user_id, alice_id);
    let arrived = start + *at;
    let shows_for = first.expires_at.saturating_duration_since(arrived);
    assert!(
        (Duration::from_secs(4)..=Duration::from_millis(6_050)).contains(&shows_for),
        "{shows_for:?}"
    );
    assert!(first.shows_at(arrived));
    assert!(!first.shows_at(first.expires_at));

    // A cancel goes out at once, and shows nothing.
    let cancelled_at = Instant::now();
    set_typing(&alice, InputPeer::user(bob_id), action(Kind::Cancel, 0)).await?;
    let cancel = loop {
        match tokio::time::timeout(Duration::from_secs(2), bob_updates.next()).await? {
            Event::Typing(t) => break t,
            Event::Status(StatusChange { .. }) => {}
            other => anyhow::bail!("expected the cancel, got {other:?}"),
        }
    };
    assert!(cancelled_at.elapsed() < Duration::from_secs(1));
    assert_eq!(cancel.action.kind, Kind::Cancel as i32);
    assert!(!cancel.shows_at(Instant::now()));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_refusals_have_stable_codes() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob, carol] = system
        .users([
            ("15557301", "Alice"),
            ("15557302", "Bob"),
            ("15557303", "Carol"),
        ])
        .await?;
    let bob_id = bob.user_id()?;
    bob.messages()
        .block(BlockRequest {
            user_id: alice.user_id()?,
        })
        .await?;
    let table = [
        (
            InputPeer::user(987_654_321),
            action(Kind::Typing, 0),
            "PEER_ID_INVALID",
        ),
        (
            InputPeer::user(0),
            action(Kind::Typing, 0),
            "PEER_ID_INVALID",
        ),
        (
            InputPeer::default(),
            action(Kind::Typing, 0),
            "PEER_ID_INVALID",
        ),
        (
            InputPeer::user(bob_id),
            action(Kind::Unspecified, 0),
            "SEND_ACTION_INVALID",
        ),
        (
            InputPeer::user(bob_id),
            SendMessageAction {
                kind: 77,
                progress: 0,
            },
            "SEND_ACTION_INVALID",
        ),
        (
            InputPeer::user(bob_id),
            action(Kind::Typing, 30),
            "SEND_ACTION_INVALID",
        ),
        (
            InputPeer::user(bob_id),
            action(Kind::UploadVideo, 101),
            "SEND_ACTION_INVALID",
        ),
        // Bob blocked Alice.
        (
            InputPeer::user(bob_id),
            action(Kind::Typing, 0),
            "USER_IS_BLOCKED",
        ),
        (
            InputPeer::user(bob_id),
            action(Kind::Cancel, 0),
            "USER_IS_BLOCKED",
        ),
    ];
    for (peer, a, expected) in table {
        let refused = set_typing(&alice, peer, a).await;
        match refused {
            Ok(()) => panic!("{peer:?} {a:?}: expected {expected}"),
            Err(status) => assert_eq!(code(&status).as_deref(), Some(expected), "{peer:?} {a:?}"),
        }
    }
    // Without an action at all.
    let missing = alice
        .messages()
        .set_typing(SetTypingRequest {
            peer: Some(InputPeer::user(bob_id)),
            action: None,
        })
        .await;
    assert_eq!(
        missing.err().and_then(|s| code(&s)).as_deref(),
        Some("SEND_ACTION_INVALID")
    );
    // Bob may still tell Alice; Saved Messages take it and tell nobody.
    set_typing(
        &bob,
        InputPeer::user(alice.user_id()?),
        action(Kind::Typing, 0),
    )
    .await?;
    set_typing(&carol, InputPeer::me(), action(Kind::Typing, 0)).await?;

    // The limit per user and minute.
    let mut flood = None;
    for _ in 0..200 {
        if let Err(status) = set_typing(&carol, InputPeer::me(), action(Kind::Typing, 0)).await {
            flood = code(&status);
            break;
        }
    }
    let flood = flood.context("no limit within 200 calls")?;
    assert!(flood.starts_with("FLOOD_WAIT_"), "{flood}");
    Ok(())
}

/// The next presence change of `user_id` on a stream, within `within`.
async fn next_status(
    updates: &mut UpdateStream,
    user_id: i64,
    within: Duration,
) -> anyhow::Result<user_status::Kind> {
    let deadline = Instant::now() + within;
    loop {
        let event = tokio::time::timeout_at(deadline, updates.next())
            .await
            .with_context(|| format!("no status of user {user_id} within {within:?}"))?;
        if let Event::Status(StatusChange {
            user_id: of,
            status: Some(status),
        }) = event
            && of == user_id
            && let Some(kind) = status.kind
        {
            return Ok(kind);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_goes_online_and_offline_with_a_last_seen() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.gateway.offline_grace_ms = 300;
    config.gateway.online_after_call_secs = 1;
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15557401", "Alice"), ("15557402", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    // Users who have a dialog with Bob hear of his presence.
    alice.send(bob_id, 1, "hi").await?;
    let state = alice.get_state().await?.into();
    let mut alice_updates =
        UpdateStream::open((*alice).clone(), state, StreamOptions::default()).await?;

    // A call keeps Bob online for a second (signing up is no call of a signed-in user), then
    // he is offline.
    bob.get_state().await?;
    let first = loop {
        let went = next_status(&mut alice_updates, bob_id, Duration::from_secs(10))
            .await
            .context("Bob offline after his call")?;
        match went {
            user_status::Kind::Online(_) => continue,
            user_status::Kind::Offline(o) => break o.was_online,
            other => anyhow::bail!("expected offline, got {other:?}"),
        }
    };
    // A stream makes him online...
    let bob_stream = bob.stream(0).await?;
    let online = next_status(&mut alice_updates, bob_id, Duration::from_secs(10))
        .await
        .context("Bob online with a stream")?;
    let user_status::Kind::Online(o) = online else {
        anyhow::bail!("expected online, got {online:?}");
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    assert!(
        o.expires > now,
        "online until a later time: {} vs {now}",
        o.expires
    );
    // ...and its end offline, last seen when it closed.
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(bob_stream);
    let closed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    let offline = next_status(&mut alice_updates, bob_id, Duration::from_secs(10))
        .await
        .context("Bob offline after the stream")?;
    let user_status::Kind::Offline(o) = offline else {
        anyhow::bail!("expected offline, got {offline:?}");
    };
    assert!(o.was_online >= first, "{} {first}", o.was_online);
    assert!(
        (closed - 2..=closed + 2).contains(&o.was_online),
        "{} vs {closed}",
        o.was_online
    );

    // Every answer with a user carries it; Postgres keeps it.
    let seen = alice
        .users()
        .resolve_phone(ResolvePhoneRequest {
            phone: "15557402".into(),
        })
        .await?
        .into_inner();
    let status = seen.status.and_then(|s| s.kind);
    assert_eq!(
        status,
        Some(user_status::Kind::Offline(o)),
        "ResolvePhone shows the same last seen"
    );
    let mut db = system.db().await?;
    let recorded: i64 = sqlx::query(
        "SELECT extract(epoch FROM was_online)::BIGINT FROM gateway.last_seen WHERE user_id = $1",
    )
    .bind(bob_id)
    .fetch_one(&mut db)
    .await?
    .try_get(0)?;
    assert_eq!(recorded, o.was_online);

    // Away and back, explicitly, while streaming.
    let _bob_stream = bob.stream(0).await?;
    let back = next_status(&mut alice_updates, bob_id, Duration::from_secs(10))
        .await
        .context("Bob online again")?;
    assert!(matches!(back, user_status::Kind::Online(_)), "{back:?}");
    bob.update_status(true).await?;
    let away = next_status(&mut alice_updates, bob_id, Duration::from_secs(10))
        .await
        .context("Bob away")?;
    assert!(
        matches!(away, user_status::Kind::Offline(_)),
        "away while streaming: {away:?}"
    );
    bob.update_status(false).await?;
    let back = next_status(&mut alice_updates, bob_id, Duration::from_secs(10))
        .await
        .context("Bob back")?;
    assert!(matches!(back, user_status::Kind::Online(_)), "{back:?}");

    // None of it is in the log: Alice's difference holds her one message.
    let difference = alice.difference(0).await?;
    assert_eq!(difference.updates.len(), 1, "{difference:?}");
    assert_eq!(alice_updates.state().pts, 1);
    let _ = alice_id;
    Ok(())
}

/// How long the gateway lets pass between two announcements of one user's presence
/// (`COALESCE` in svc-gateway/src/presence.rs).
const PRESENCE_COALESCE: Duration = Duration::from_secs(3);

/// The status of `user_id` a stream event carries, if it is one.
fn status_of(event: StreamEvent, user_id: i64) -> Option<user_status::Kind> {
    match event.kind {
        Some(stream_event::Kind::UserStatus(s)) if s.user_id == user_id => s.status?.kind,
        _ => None,
    }
}

/// Every status of `user_id` a raw stream carries until `until`, with when each arrived.
async fn statuses_until(
    stream: &mut Streaming<StreamEvent>,
    user_id: i64,
    until: Instant,
) -> anyhow::Result<Vec<(Instant, user_status::Kind)>> {
    let mut seen = Vec::new();
    loop {
        let event = match tokio::time::timeout_at(until, stream.message()).await {
            Err(_) => return Ok(seen),
            Ok(event) => event?.context("the stream ended")?,
        };
        if let Some(kind) = status_of(event, user_id) {
            seen.push((Instant::now(), kind));
        }
    }
}

/// Presence changes are coalesced, never flooding: Alice's device goes away and back twenty
/// times within about a second; Bob, who has a dialog with her and streams, hears her status
/// once at the burst's first change and then at most once per coalescing window, and the
/// last he hears is how she is after the burst (back: online). Announced one by one, the
/// twenty changes would reach him as twenty pushes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_presence_changes_reaches_a_peer_coalesced() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    // A call keeps her online longer than the test runs: only the burst changes her presence.
    config.gateway.online_after_call_secs = 60;
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15557601", "Alice"), ("15557602", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    alice.send(bob_id, 1, "hi").await?;
    let mut bob_stream = bob.stream(0).await?;
    // Her send made her online: whatever that announced is over a window later.
    let settled = Instant::now() + PRESENCE_COALESCE + Duration::from_millis(500);
    statuses_until(&mut bob_stream, alice_id, settled).await?;

    const CHANGES: usize = 20;
    let start = Instant::now();
    let changes = async {
        for i in 0..CHANGES {
            // Away first, back last.
            alice.update_status(i % 2 == 0).await?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::Ok(start.elapsed())
    };
    tokio::pin!(changes);
    // What Bob hears while the burst lasts...
    let mut seen = Vec::new();
    let burst = loop {
        tokio::select! {
            burst = &mut changes => break burst?,
            event = bob_stream.message() => {
                if let Some(kind) = status_of(event?.context("the stream ended")?, alice_id) {
                    seen.push((Instant::now(), kind));
                }
            }
        }
    };
    // ...and up to a window after it, when the last window's announcement has gone out.
    let until = Instant::now() + PRESENCE_COALESCE + Duration::from_millis(1_500);
    seen.extend(statuses_until(&mut bob_stream, alice_id, until).await?);
    let at: Vec<Duration> = seen.iter().map(|(t, _)| *t - start).collect();
    println!("{CHANGES} changes in {burst:?}; Bob heard her status at {at:?}");

    // One at the first change, then one per window the burst reaches into.
    let windows = burst.as_millis().div_ceil(PRESENCE_COALESCE.as_millis()) as usize;
    assert!(
        !seen.is_empty() && seen.len() <= 1 + windows,
        "{CHANGES} changes within {burst:?} make at most {} pushes, Bob heard {} (at {at:?})",
        1 + windows,
        seen.len()
    );
    for pair in at.windows(2) {
        assert!(
            pair[1] - pair[0] >= PRESENCE_COALESCE / 2,
            "two pushes within a window: {at:?}"
        );
    }
    let last = &seen.last().context("a push")?.1;
    assert!(
        matches!(last, user_status::Kind::Online(_)),
        "the last push says she is back: {last:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_gateway_pushes_transient_events_and_late_typing_is_dropped() -> anyhow::Result<()>
{
    use oxigram_proto::{
        gateway::v1::{
            PushTransientRequest, TransientEvent, gateway_push_client::GatewayPushClient,
            transient_event,
        },
        types::v1::{UpdateUserStatus, UserStatus, UserStatusRecently},
    };
    let system = System::start(Mode::OneProcess).await?;
    let [bob] = system.users([("15557501", "Bob")]).await?;
    let bob_id = bob.user_id()?;
    let mut bob_stream = bob.stream(0).await?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let typing = |from: i64, made_at_ms: i64| TransientEvent {
        user_id: bob_id,
        made_at_ms,
        kind: Some(transient_event::Kind::UserTyping(UpdateUserTyping {
            user_id: from,
            action: Some(action(Kind::Typing, 0)),
            timeout_ms: 6_000,
        })),
    };
    // What another gateway instance sends: a typing event made 5 s ago (late), one made now,
    // and a status.
    let status = TransientEvent {
        user_id: bob_id,
        made_at_ms: now_ms - 60_000,
        kind: Some(transient_event::Kind::UserStatus(UpdateUserStatus {
            user_id: 77,
            status: Some(UserStatus {
                kind: Some(user_status::Kind::Recently(UserStatusRecently {})),
            }),
        })),
    };
    let mut peer = GatewayPushClient::connect(system.gateway()).await?;
    let delivered = peer
        .push_transient(PushTransientRequest {
            events: vec![typing(71, now_ms - 5_000), typing(72, now_ms), status],
        })
        .await?
        .into_inner()
        .delivered;
    assert_eq!(delivered, 3, "every event was offered to Bob's one stream");
    let mut got = Vec::new();
    while got.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(5), bob_stream.message())
            .await??
            .context("the stream ended")?;
        got.push(event.kind);
    }
    let Some(stream_event::Kind::UserTyping(t)) = got[0] else {
        anyhow::bail!("the fresh typing first, got {:?}", got[0]);
    };
    assert_eq!(t.user_id, 72, "the late one was dropped");
    assert!((5_000..=6_000).contains(&t.timeout_ms), "{}", t.timeout_ms);
    assert!(
        matches!(got[1], Some(stream_event::Kind::UserStatus(s)) if s.user_id == 77),
        "a status is never late: {:?}",
        got[1]
    );
    Ok(())
}

/// Alice shows her exact last seen to her contacts only: a contact hears the time on his
/// stream and reads it in ResolvePhone, a stranger gets the approximate "recently" in both. A
/// contact she blocked hears nothing of her and reads no status ("a long time ago").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_seen_rule_decides_who_sees_the_exact_time() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.gateway.offline_grace_ms = 300;
    config.gateway.online_after_call_secs = 1;
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let [alice, bob, carol, dave] = system
        .users([
            ("15557501", "Alice"),
            ("15557502", "Bob"),
            ("15557503", "Carol"),
            ("15557504", "Dave"),
        ])
        .await?;
    let alice_id = alice.user_id()?;
    last_seen_for_contacts(&alice).await?;
    alice
        .import_contacts(&[("15557502", "Bob", ""), ("15557504", "Dave", "")])
        .await?;
    // All have a dialog with her; she blocks Dave once his message made his.
    let mut streams = Vec::new();
    for viewer in [&bob, &carol, &dave] {
        viewer.send(alice_id, 1, "hello").await?;
        let state = viewer.get_state().await?.into();
        streams
            .push(UpdateStream::open((**viewer).clone(), state, StreamOptions::default()).await?);
    }

    alice
        .messages()
        .block(BlockRequest {
            user_id: dave.user_id()?,
        })
        .await?;
    let mut dave_updates = streams.pop().context("Dave's stream")?;
    // What was announced before the block took effect is behind us.
    tokio::time::sleep(Duration::from_millis(500)).await;
    while next_status(&mut dave_updates, alice_id, Duration::from_millis(300))
        .await
        .is_ok()
    {}

    // A call makes her online for a second, then offline.
    alice.get_state().await?;
    let mut seen = Vec::new();
    for updates in &mut streams {
        let offline = loop {
            match next_status(updates, alice_id, Duration::from_secs(10)).await? {
                user_status::Kind::Online(_) => continue,
                other => break other,
            }
        };
        seen.push(offline);
    }
    let user_status::Kind::Offline(exact) = &seen[0] else {
        anyhow::bail!("her contact sees {:?}, not the exact time", seen[0]);
    };
    assert!(exact.was_online > 0);
    assert!(
        matches!(seen[1], user_status::Kind::Recently(_)),
        "a stranger sees {:?}",
        seen[1]
    );
    // Answers that carry her say the same.
    for (viewer, expected) in [(&bob, &seen[0]), (&carol, &seen[1])] {
        let seen = status_by_phone(viewer, "15557501").await?;
        assert_eq!(seen.as_ref(), Some(expected));
    }
    // The others heard both changes by now; Dave, whom she blocked, hears none.
    let heard = next_status(&mut dave_updates, alice_id, Duration::from_secs(1)).await;
    assert!(heard.is_err(), "Dave heard {heard:?}");
    let history = dave
        .get_history(oxigram_proto::api::v1::GetHistoryRequest {
            peer: Some(InputPeer::user(alice_id)),
            ..Default::default()
        })
        .await?;
    let her = history.users.iter().find(|u| u.id == alice_id);
    assert_eq!(her.map(|u| u.status), Some(None), "Dave reads no status");
    Ok(())
}

/// How long ago a user was online, as those her last-seen rule keeps from the time see it:
/// "recently" within three days, then "within a week", "within a month", then nothing; her
/// contact, whom the rule lets see the time, reads the time itself. Her last seen is moved back
/// in the gateway's table and her presence dropped from Redis, as after a long absence (Redis
/// forgets presences; the table keeps the last seen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_see_how_long_ago_in_buckets() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.gateway.offline_grace_ms = 300;
    config.gateway.online_after_call_secs = 1;
    let redis_url = config.redis_url.clone().context("no redis")?;
    let prefix = config.redis_key_prefix.clone();
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let [alice, bob, carol] = system
        .users([
            ("15557521", "Alice"),
            ("15557522", "Bob"),
            ("15557523", "Carol"),
        ])
        .await?;
    let alice_id = alice.user_id()?;
    last_seen_for_contacts(&alice).await?;
    alice.import_contacts(&[("15557522", "Bob", "")]).await?;
    // Her last call is behind her once she has gone offline with a last seen.
    eventually(Duration::from_secs(10), "her last seen", || {
        let db = system.db();
        async move {
            let kept: Option<i64> =
                sqlx::query_scalar("SELECT user_id FROM gateway.last_seen WHERE user_id = $1")
                    .bind(alice_id)
                    .fetch_optional(&mut db.await?)
                    .await?;
            Ok(kept.map(|_| ()))
        }
    })
    .await?;
    let mut db = system.db().await?;
    let redis = redis::Client::open(redis_url.as_str())?;
    let mut redis = redis.get_multiplexed_async_connection().await?;
    let hour = 60 * 60;
    let day = 24 * hour;
    // (case, how long ago, what a stranger sees: none for nothing)
    type Bucket = Option<fn(&user_status::Kind) -> bool>;
    let table: [(&str, i64, Bucket); 5] = [
        (
            "two days ago",
            2 * day,
            Some(|k| matches!(k, user_status::Kind::Recently(_))),
        ),
        (
            "four days ago",
            4 * day,
            Some(|k| matches!(k, user_status::Kind::LastWeek(_))),
        ),
        (
            "six days ago",
            6 * day + 23 * hour,
            Some(|k| matches!(k, user_status::Kind::LastWeek(_))),
        ),
        (
            "twenty days ago",
            20 * day,
            Some(|k| matches!(k, user_status::Kind::LastMonth(_))),
        ),
        ("sixty days ago", 60 * day, None),
    ];
    for (case, ago, expected) in table {
        let was_online: i64 =
            sqlx::query_scalar("UPDATE gateway.last_seen SET was_online = now() - make_interval(secs => $2) WHERE user_id = $1 RETURNING floor(extract(epoch FROM was_online))::BIGINT")
                .bind(alice_id)
                .bind(ago as f64)
                .fetch_one(&mut db)
                .await?;
        redis::cmd("DEL")
            .arg(format!("{prefix}presence:{alice_id}"))
            .query_async::<()>(&mut redis)
            .await?;
        let seen = status_by_phone(&carol, "15557521").await?;
        match (expected, &seen) {
            (Some(is), Some(kind)) => assert!(is(kind), "{case}: a stranger sees {kind:?}"),
            (None, None) => {}
            _ => panic!("{case}: a stranger sees {seen:?}"),
        }
        let exact = status_by_phone(&bob, "15557521").await?;
        let Some(user_status::Kind::Offline(exact)) = exact else {
            panic!("{case}: her contact sees {exact:?}, not the time");
        };
        assert_eq!(exact.was_online, was_online, "{case}: her contact's time");
    }
    Ok(())
}

/// The status of the user with `phone` as `viewer` reads it in ResolvePhone.
async fn status_by_phone(
    viewer: &TestClient,
    phone: &str,
) -> anyhow::Result<Option<user_status::Kind>> {
    let her = viewer
        .users()
        .resolve_phone(ResolvePhoneRequest {
            phone: phone.into(),
        })
        .await?
        .into_inner();
    Ok(her.status.and_then(|s| s.kind))
}

/// `user` shows her exact last seen to her contacts only.
async fn last_seen_for_contacts(user: &TestClient) -> anyhow::Result<()> {
    user.set_privacy(PrivacyRule {
        key: privacy_rule::Key::LastSeen as i32,
        value: privacy_rule::Value::Contacts as i32,
        ..Default::default()
    })
    .await?;
    Ok(())
}
