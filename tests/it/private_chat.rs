//! Every rule of the private chat through the gateway, with its stable error code for bad
//! input, and the authorization rules: nobody sees another user's boxes, dialogs or receipts.

use std::time::Duration;

use anyhow::Context;
use oxigram_proto::api::v1::{
    AckRequest, BlockRequest, GetAuthorizationsRequest, GetBlockedRequest, GetHistoryRequest,
    GetMessagesRequest, GetOutboxReadDateRequest, LogOutRequest, ReadHistoryRequest,
    ReceivedMessagesRequest, ResetAuthorizationRequest, SendCodeRequest, SendMessageRequest,
    SignInRequest, SignUpRequest, stream_event,
};
use oxigram_proto::types::v1::{InputPeer, update};
use oxigram_tests::{
    Mode, System, TestClient,
    client::{code, next_logged, next_update_where},
    eventually,
};

fn expect_code<T: std::fmt::Debug>(result: Result<T, tonic::Status>, expected: &str) {
    match result {
        Ok(v) => panic!("expected {expected}, got {v:?}"),
        Err(status) => assert_eq!(code(&status).as_deref(), Some(expected), "{status:?}"),
    }
}

async fn dialog_with(
    c: &TestClient,
    peer: i64,
) -> anyhow::Result<Option<oxigram_proto::api::v1::Dialog>> {
    let page = c.dialogs_page().await?;
    Ok(page.dialogs.into_iter().find(|d| d.peer_user() == peer))
}

/// Alice, Bob and Carol, each signed up on one device of a system of the test's own.
async fn alice_bob_carol(system: &System) -> anyhow::Result<[TestClient; 3]> {
    system
        .users([
            ("15554101", "Alice"),
            ("15554102", "Bob"),
            ("15554103", "Carol"),
        ])
        .await
}

/// The hash of a login code sent to `phone`, for the sign-in and sign-up requests that follow.
async fn phone_code_hash(device: &TestClient, phone: &str) -> anyhow::Result<String> {
    Ok(device
        .auth()
        .send_code(SendCodeRequest {
            phone: phone.into(),
        })
        .await?
        .into_inner()
        .phone_code_hash)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_stable_codes_and_writes_nothing() -> anyhow::Result<()> {
    let (mut config, dir) = System::config().await?;
    // Every send request counts, accepted or not.
    config.gateway.sends_per_minute = 8;
    let system = System::start_with(config, dir, Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15554001", "Alice"), ("15554002", "Bob")])
        .await?;
    let bob_id = bob.user_id()?;

    let send = |random_id: i64, text: &str, reply_to_msg_id: i64| SendMessageRequest {
        peer: Some(InputPeer::user(bob_id)),
        random_id,
        text: text.into(),
        reply_to_msg_id,
        ..Default::default()
    };
    let refused_sends = [
        (send(1, &"x".repeat(4097), 0), "MESSAGE_TOO_LONG"),
        (send(2, "   ", 0), "MESSAGE_EMPTY"),
        (
            SendMessageRequest {
                peer: Some(InputPeer::user(987_654_321)),
                ..send(3, "hi", 0)
            },
            "PEER_ID_INVALID",
        ),
        (send(0, "hi", 0), "RANDOM_ID_INVALID"),
        (send(4, "re", 77), "REPLY_MESSAGE_ID_INVALID"),
    ];
    for (request, expected) in refused_sends {
        expect_code(alice.messages().send_message(request).await, expected);
    }
    // None of that wrote anything.
    assert!(bob.difference(0).await?.updates.is_empty());
    assert!(alice.difference(0).await?.updates.is_empty());

    alice.send(bob_id, 10, "first").await?;
    expect_code(
        alice.send(bob_id, 10, "a different text").await,
        "RANDOM_ID_DUPLICATE",
    );
    let [carol] = system.users([("15554003", "Carol")]).await?;
    oxigram_tests::avoid_minute_edge().await?;
    for i in 0..8 {
        carol.send(bob_id, 11 + i, "more").await?;
    }
    let flood = carol.send(bob_id, 20, "one too many").await;
    let status = flood.err().context("the ninth send in a minute passed")?;
    let flood_code = code(&status).unwrap_or_default();
    assert!(flood_code.starts_with("FLOOD_WAIT_"), "{flood_code}");
    let wait: u32 = flood_code.trim_start_matches("FLOOD_WAIT_").parse()?;
    assert!((1..=60).contains(&wait));
    assert_eq!(
        bob.history(carol.user_id()?).await?.len(),
        8,
        "the refused send wrote nothing"
    );
    assert_eq!(bob.history(alice.user_id()?).await?.len(), 1);

    let history = alice
        .messages()
        .get_history(GetHistoryRequest {
            peer: Some(InputPeer::user(bob_id)),
            limit: -1,
            ..Default::default()
        })
        .await;
    expect_code(history, "LIMIT_INVALID");
    expect_code(
        alice.updates().ack(AckRequest { pts: 99 }).await,
        "PERSISTENT_TIMESTAMP_INVALID",
    );
    expect_code(alice.difference(-1).await, "PERSISTENT_TIMESTAMP_INVALID");

    // Sign-up and sign-in rules.
    let fresh = system.device().await?;
    let bad_phone = fresh
        .auth()
        .send_code(SendCodeRequest {
            phone: "12ab".into(),
        })
        .await;
    expect_code(bad_phone, "PHONE_NUMBER_INVALID");
    let hash = phone_code_hash(&fresh, "15554009").await?;
    let sign_in = fresh
        .auth()
        .sign_in(SignInRequest {
            phone: "15554009".into(),
            phone_code_hash: hash.clone(),
            code: "12345".into(),
        })
        .await;
    expect_code(sign_in, "PHONE_NUMBER_UNOCCUPIED");
    let taken_hash = phone_code_hash(&fresh, "15554001").await?;
    let sign_up =
        |phone: &str, phone_code_hash: &str, code: &str, first_name: &str| SignUpRequest {
            phone: phone.into(),
            phone_code_hash: phone_code_hash.into(),
            code: code.into(),
            first_name: first_name.into(),
        };
    let refused_sign_ups = [
        (
            sign_up("15554009", &hash, "00000", "New"),
            "PHONE_CODE_INVALID",
        ),
        (
            sign_up("15554009", &hash, "12345", " "),
            "FIRSTNAME_INVALID",
        ),
        (
            sign_up("15554001", &taken_hash, "12345", "Again"),
            "PHONE_NUMBER_OCCUPIED",
        ),
    ];
    for (request, expected) in refused_sign_ups {
        expect_code(fresh.auth().sign_up(request).await, expected);
    }
    // An unbound key can only authenticate.
    expect_code(fresh.difference(0).await, "AUTH_KEY_UNREGISTERED");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_messages_and_reply_ids_in_each_owners_view() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob, carol] = alice_bob_carol(&system).await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);

    let note = alice.send(alice_id, 1, "note to self").await?;
    assert_eq!(
        (note.pts, note.message.as_ref().map(|m| m.out)),
        (1, Some(true))
    );
    assert_eq!(
        alice.history(alice_id).await?.len(),
        1,
        "one box for Saved Messages"
    );

    // Carol writes Bob first, so Bob's ids and Alice's ids for the same message differ.
    carol.send(bob_id, 1, "hello Bob").await?;
    let m = alice
        .send(bob_id, 2, "question")
        .await?
        .message
        .context("message")?;
    assert_eq!(m.id, 2, "Alice's second message");
    let bobs_copy = bob.history(alice_id).await?;
    assert_eq!(bobs_copy[0].id, 2, "Bob's second message");
    let carol_first = carol.send(bob_id, 2, "again").await?;
    assert!(carol_first.pts > 0);
    // Bob (ids: 1 Carol, 2 Alice, 3 Carol) replies to Alice's message, in his own id 2.
    let answer = bob
        .messages()
        .send_message(SendMessageRequest {
            peer: Some(InputPeer::user(alice_id)),
            random_id: 9,
            text: "answer".into(),
            reply_to_msg_id: 2,
            silent: true,
            noforwards: true,
            ..Default::default()
        })
        .await?
        .into_inner()
        .message
        .context("message")?;
    assert_eq!(
        (
            answer.id,
            answer.reply_to_msg_id,
            answer.silent,
            answer.noforwards
        ),
        (4, 2, true, true)
    );
    let alices = alice.history(bob_id).await?;
    assert_eq!(alices[0].text, "answer");
    assert_eq!(
        alices[0].reply_to_msg_id, m.id,
        "the reply names Alice's own id"
    );
    assert!(alices[0].silent && alices[0].noforwards);
    // Replying across chats is refused.
    let cross = bob
        .messages()
        .send_message(SendMessageRequest {
            peer: Some(InputPeer::user(alice_id)),
            random_id: 10,
            text: "x".into(),
            reply_to_msg_id: 1, // Carol's message
            ..Default::default()
        })
        .await;
    expect_code(cross, "REPLY_MESSAGE_ID_INVALID");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_window_semantics() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15554201", "Alice"), ("15554202", "Bob")])
        .await?;
    let bob_id = bob.user_id()?;
    for i in 1..=30 {
        alice.send(bob_id, i, &format!("m{i}")).await?;
    }
    let ids = |req: GetHistoryRequest| {
        let alice = &alice;
        async move {
            let page = alice.messages().get_history(req).await?.into_inner();
            anyhow::Ok(page.messages.iter().map(|m| m.id).collect::<Vec<_>>())
        }
    };
    let base = GetHistoryRequest {
        peer: Some(InputPeer::user(bob_id)),
        ..Default::default()
    };
    assert_eq!(
        ids(GetHistoryRequest { limit: 3, ..base }).await?,
        [30, 29, 28]
    );
    assert_eq!(
        ids(GetHistoryRequest {
            offset_id: 10,
            limit: 3,
            ..base
        })
        .await?,
        [9, 8, 7]
    );
    assert_eq!(
        ids(GetHistoryRequest {
            offset_id: 10,
            add_offset: 2,
            limit: 3,
            ..base
        })
        .await?,
        [7, 6, 5]
    );
    assert_eq!(
        ids(GetHistoryRequest {
            offset_id: 10,
            add_offset: -2,
            limit: 4,
            ..base
        })
        .await?,
        [11, 10, 9, 8],
        "a window around the anchor"
    );
    assert_eq!(
        ids(GetHistoryRequest {
            offset_id: 10,
            add_offset: -5,
            limit: 2,
            ..base
        })
        .await?,
        [14, 13],
        "a window entirely after the anchor"
    );
    assert_eq!(
        ids(GetHistoryRequest {
            max_id: 6,
            min_id: 2,
            limit: 100,
            ..base
        })
        .await?,
        [5, 4, 3]
    );
    let huge = ids(GetHistoryRequest {
        offset_id: 30,
        add_offset: 1000,
        limit: 100,
        ..base
    })
    .await?;
    assert!(
        huge.is_empty(),
        "add_offset is clamped to 100, past the 29 older messages"
    );
    assert_eq!(
        ids(GetHistoryRequest {
            limit: 1000,
            ..base
        })
        .await?
        .len(),
        30
    );
    // Everything was sent within this second or the previous: a date anchor after now is all.
    let now = alice.history(bob_id).await?[0].date;
    assert_eq!(
        ids(GetHistoryRequest {
            offset_date: now + 1,
            limit: 2,
            ..base
        })
        .await?,
        [30, 29]
    );
    let by_ids = alice
        .messages()
        .get_messages(GetMessagesRequest {
            ids: vec![3, 1, 999],
        })
        .await?
        .into_inner();
    assert_eq!(
        by_ids.messages.iter().map(|m| m.id).collect::<Vec<_>>(),
        [1, 3]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_move_watermarks_once_and_reach_the_sender_in_her_ids() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice] = system.users([("15554301", "Alice")]).await?;
    let (bob_phone, bob_laptop, bob_id) = system.user_on_two_devices("15554302", "Bob").await?;
    let [carol] = system.users([("15554303", "Carol")]).await?;
    let alice_id = alice.user_id()?;

    carol.send(bob_id, 1, "shifts Bob's ids").await?;
    for i in 1..=3 {
        alice.send(bob_id, 10 + i, &format!("a{i}")).await?;
    }
    let first = alice
        .send(bob_id, 20, "a4")
        .await?
        .message
        .context("message")?;
    // Sending never marks anything read for the sender. Her dialog is a projection of her log,
    // so it is awaited until it holds her last message.
    let alice_dialog = eventually(
        Duration::from_secs(15),
        "Alice's dialog with her last message",
        || async {
            Ok(dialog_with(&alice, bob_id)
                .await?
                .filter(|d| d.top_message_id == first.id))
        },
    )
    .await?;
    assert_eq!(alice_dialog.read_outbox_max_id, 0);
    expect_code(
        alice
            .messages()
            .get_outbox_read_date(GetOutboxReadDateRequest {
                peer: Some(InputPeer::user(bob_id)),
                msg_id: first.id,
            })
            .await,
        "MESSAGE_NOT_READ_YET",
    );

    // Dialogs apply messages asynchronously: a read names messages they already hold.
    eventually(
        Duration::from_secs(15),
        "Bob's dialog with all of Alice's messages",
        || async {
            Ok(dialog_with(&bob_phone, alice_id)
                .await?
                .filter(|d| d.top_message_id == 5)
                .map(|_| ()))
        },
    )
    .await?;
    let mut laptop_stream = bob_laptop.stream(0).await?;
    let mut alice_stream = alice.stream(0).await?;
    // Bob's ids: 1 Carol, 2..5 Alice. He reads up to his id 3 (Alice's second message).
    let read = bob_phone
        .messages()
        .read_history(ReadHistoryRequest {
            peer: Some(InputPeer::user(alice_id)),
            max_id: 3,
        })
        .await?
        .into_inner();
    assert_eq!(read.pts_count, 1);
    let bob_pts = read.pts;
    let again = bob_phone
        .messages()
        .read_history(ReadHistoryRequest {
            peer: Some(InputPeer::user(alice_id)),
            max_id: 3,
        })
        .await?
        .into_inner();
    assert_eq!(
        (again.pts, again.pts_count),
        (bob_pts, 0),
        "a repeat is a no-op"
    );
    let lower = bob_phone
        .messages()
        .read_history(ReadHistoryRequest {
            peer: Some(InputPeer::user(alice_id)),
            max_id: 2,
        })
        .await?
        .into_inner();
    assert_eq!(lower.pts_count, 0, "never backwards");

    // The laptop skips the five message updates and gets the inbox read.
    let inbox = next_update_where(&mut laptop_stream, |k| match k {
        update::Kind::ReadHistoryInbox(r) => Some(r),
        _ => None,
    })
    .await?;
    assert_eq!(
        (inbox.peer_user(), inbox.max_id, inbox.still_unread_count),
        (alice_id, 3, 2)
    );
    // Alice learns it in her own ids: her second message.
    let outbox = next_update_where(&mut alice_stream, |k| match k {
        update::Kind::ReadHistoryOutbox(r) => Some(r),
        _ => None,
    })
    .await?;
    assert_eq!((outbox.peer_user(), outbox.max_id), (bob_id, 2));
    let dialog = dialog_with(&alice, bob_id).await?.context("dialog")?;
    assert_eq!(dialog.read_outbox_max_id, 2);
    let date = alice
        .messages()
        .get_outbox_read_date(GetOutboxReadDateRequest {
            peer: Some(InputPeer::user(bob_id)),
            msg_id: 2,
        })
        .await?
        .into_inner()
        .date;
    assert!(date > 0);
    expect_code(
        alice
            .messages()
            .get_outbox_read_date(GetOutboxReadDateRequest {
                peer: Some(InputPeer::user(bob_id)),
                msg_id: 3,
            })
            .await,
        "MESSAGE_NOT_READ_YET",
    );
    let bobs = bob_phone.dialogs_page().await?;
    let with_alice = bobs
        .dialogs
        .iter()
        .find(|d| d.peer_user() == alice_id)
        .context("dialog")?;
    assert_eq!(
        (with_alice.read_inbox_max_id, with_alice.unread_count),
        (3, 2)
    );
    // Reading everything.
    bob_laptop
        .messages()
        .read_history(ReadHistoryRequest {
            peer: Some(InputPeer::user(alice_id)),
            max_id: 0,
        })
        .await?;
    let bobs = bob_phone.dialogs_page().await?;
    let with_alice = bobs
        .dialogs
        .iter()
        .find(|d| d.peer_user() == alice_id)
        .context("dialog")?;
    assert_eq!(
        (with_alice.read_inbox_max_id, with_alice.unread_count),
        (5, 0)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_receipts_are_per_device_and_reach_the_sender() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice] = system.users([("15554401", "Alice")]).await?;
    let (bob_phone, bob_laptop, bob_id) = system.user_on_two_devices("15554402", "Bob").await?;
    for i in 1..=4 {
        alice.send(bob_id, i, &format!("m{i}")).await?;
    }
    // Receipts cover the messages dialogs has applied (the answer says how far): wait for all.
    eventually(
        Duration::from_secs(15),
        "Bob's dialog to have all four",
        || async {
            let dialogs = bob_phone.dialogs_page().await?.dialogs;
            Ok(dialogs.iter().any(|d| d.top_message_id == 4).then_some(()))
        },
    )
    .await?;
    let phone = bob_phone
        .messages()
        .received_messages(ReceivedMessagesRequest { max_id: 3 })
        .await?
        .into_inner();
    assert_eq!(phone.max_id, 3);
    let laptop = bob_laptop
        .messages()
        .received_messages(ReceivedMessagesRequest { max_id: 2 })
        .await?
        .into_inner();
    assert_eq!(laptop.max_id, 2, "each device keeps its own watermark");
    let beyond = bob_laptop
        .messages()
        .received_messages(ReceivedMessagesRequest { max_id: 100 })
        .await?
        .into_inner();
    assert_eq!(beyond.max_id, 4, "never past what the user has");
    let (slices, _) = alice.full_difference(4).await?;
    let receipts: Vec<(i64, i64)> = slices
        .iter()
        .flat_map(|d| d.updates.iter())
        .filter_map(|u| match u.update.as_ref()?.kind.as_ref()? {
            update::Kind::DeliveredOutbox(r) => Some((r.peer_user(), r.max_id)),
            _ => None,
        })
        .collect();
    assert_eq!(
        receipts,
        [(bob_id, 3), (bob_id, 4)],
        "the first device to store a message tells"
    );
    let dialog = alice.dialogs_page().await?.dialogs;
    assert_eq!(dialog[0].delivered_outbox_max_id, 4);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_sender_sees_her_message_and_the_blocker_gets_nothing() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob, carol] = alice_bob_carol(&system).await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    bob.messages()
        .block(BlockRequest { user_id: alice_id })
        .await?;
    let blocked = bob
        .messages()
        .get_blocked(GetBlockedRequest {
            offset_user_id: 0,
            limit: 10,
        })
        .await?
        .into_inner();
    assert_eq!(
        blocked.users.iter().map(|u| u.id).collect::<Vec<_>>(),
        [alice_id]
    );

    let mut bob_stream = bob.stream(0).await?;
    let sent = alice.send(bob_id, 1, "can you hear me").await?;
    assert_eq!(sent.pts, 1, "the sender's own update");
    assert_eq!(
        alice.history(bob_id).await?.len(),
        1,
        "the sender sees her message"
    );
    carol.send(bob_id, 1, "after").await?;
    let first = next_logged(&mut bob_stream, Duration::from_secs(15)).await?;
    let Some(stream_event::Kind::Update(u)) = first.kind else {
        anyhow::bail!("expected an update");
    };
    let Some(update::Kind::NewMessage(n)) = u.update.and_then(|u| u.kind) else {
        anyhow::bail!("expected a message");
    };
    assert_eq!(
        n.message.map(|m| m.text),
        Some("after".into()),
        "no push of the blocked message"
    );
    assert_eq!(u.pts, 1, "no pts for it either");
    let diff = bob.difference(0).await?;
    assert_eq!(diff.updates.len(), 1);
    assert!(bob.history(alice_id).await?.is_empty(), "no box");

    bob.messages()
        .unblock(BlockRequest { user_id: alice_id })
        .await?;
    alice.send(bob_id, 2, "now?").await?;
    assert_eq!(bob.history(alice_id).await?.len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_reads_another_users_boxes_and_signed_out_keys_are_refused() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice] = system.users([("15554601", "Alice")]).await?;
    let mut bob = system.device().await?;
    let bob_id = bob.sign_up("15554602", "Bob").await?.id;
    let [carol] = system.users([("15554603", "Carol")]).await?;
    let alice_id = alice.user_id()?;
    let sent = alice
        .send(bob_id, 1, "private")
        .await?
        .message
        .context("message")?;

    // Carol asks for the A–B conversation in every way she can.
    assert!(carol.history(alice_id).await?.is_empty());
    assert!(carol.history(bob_id).await?.is_empty());
    let by_id = carol
        .messages()
        .get_messages(GetMessagesRequest { ids: vec![sent.id] })
        .await?
        .into_inner();
    assert!(by_id.messages.is_empty());
    assert!(carol.difference(0).await?.updates.is_empty());
    assert!(carol.dialogs_page().await?.dialogs.is_empty());
    expect_code(
        carol
            .messages()
            .get_outbox_read_date(GetOutboxReadDateRequest {
                peer: Some(InputPeer::user(bob_id)),
                msg_id: sent.id,
            })
            .await,
        "MESSAGE_ID_INVALID",
    );

    // Devices: list them, end another one, log out, switch accounts.
    let mut bob_laptop = system.device().await?;
    bob_laptop.sign_in("15554602").await?;
    let devices = bob
        .auth()
        .get_authorizations(GetAuthorizationsRequest {})
        .await?
        .into_inner()
        .authorizations;
    assert_eq!(devices.len(), 2);
    assert_eq!(devices.iter().filter(|d| d.current).count(), 1);
    expect_code(
        bob.auth()
            .reset_authorization(ResetAuthorizationRequest {
                auth_key_id: bob.auth_key_id,
            })
            .await,
        "HASH_INVALID",
    );
    expect_code(
        carol
            .auth()
            .reset_authorization(ResetAuthorizationRequest {
                auth_key_id: bob_laptop.auth_key_id,
            })
            .await,
        "HASH_INVALID",
    );
    bob.auth()
        .reset_authorization(ResetAuthorizationRequest {
            auth_key_id: bob_laptop.auth_key_id,
        })
        .await?;
    expect_code(bob_laptop.difference(0).await, "AUTH_KEY_UNREGISTERED");

    let mut stream = bob.stream(0).await?;
    bob.auth().log_out(LogOutRequest {}).await?;
    expect_code(bob.difference(0).await, "AUTH_KEY_UNREGISTERED");
    expect_code(
        bob.send(alice_id, 5, "still me?").await,
        "AUTH_KEY_UNREGISTERED",
    );
    let ended = tokio::time::timeout(Duration::from_secs(10), stream.message()).await?;
    assert!(
        matches!(ended, Ok(None) | Err(_)),
        "the logged-out device's stream ends"
    );

    // The same key signs in to another account: it sees only that account's data.
    bob.sign_in("15554603").await?;
    assert!(
        bob.history(alice_id).await?.is_empty(),
        "Carol's view, not Bob's"
    );
    assert!(bob.difference(0).await?.updates.is_empty());

    // A garbage key is refused before anything else.
    let mut forged = system.device().await?;
    forged.sign_in("15554601").await?;
    let channel = tonic::transport::Endpoint::from_shared(system.gateway())?
        .connect()
        .await?;
    let mut raw = oxigram_proto::api::v1::updates_client::UpdatesClient::new(channel);
    let mut request = tonic::Request::new(oxigram_proto::api::v1::GetStateRequest {});
    request.metadata_mut().insert(
        oxigram_proto::AUTH_KEY_HEADER,
        format!("{}:00", forged.auth_key_id).parse()?,
    );
    expect_code(raw.get_state(request).await, "AUTH_KEY_INVALID");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_older_than_retention_is_told_difference_too_long() -> anyhow::Result<()> {
    let (mut config, dir) = System::config().await?;
    config.updates.retain_per_user = 10;
    let system = System::start_with(config, dir, Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15554701", "Alice"), ("15554702", "Bob")])
        .await?;
    for i in 1..=30 {
        alice.send(bob.user_id()?, i, "x").await?;
    }
    let old = bob.difference(0).await?;
    assert!(old.too_long);
    assert_eq!(old.state.map(|s| s.pts), Some(30));
    let recent = bob.difference(25).await?;
    assert!(!recent.too_long);
    assert_eq!(
        recent.updates.iter().map(|u| u.pts).collect::<Vec<_>>(),
        [26, 27, 28, 29, 30]
    );
    // The stream tells the device to call getDifference instead of replaying.
    let mut stream = bob.stream(1).await?;
    let first = next_logged(&mut stream, Duration::from_secs(10)).await?;
    assert!(matches!(
        first.kind,
        Some(stream_event::Kind::DifferenceNeeded(_))
    ));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_sending_goes_on() -> anyhow::Result<()> {
    let (mut config, dir) = System::config().await?;
    // Nothing listens there: routes and the shared rate-limit window are unavailable.
    config.redis_url = Some("redis://127.0.0.1:1".into());
    config.gateway.sends_per_minute = 3;
    let system = System::start_with(config, dir, Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15554801", "Alice"), ("15554802", "Bob")])
        .await?;
    let _stream = bob.stream(0).await?; // opens; its route cannot be registered
    oxigram_tests::avoid_minute_edge().await?;
    for i in 1..=3 {
        let sent = alice.send(bob.user_id()?, i, "still sending").await?;
        assert_eq!(sent.pts, i as i32, "PERSISTED and logged without Redis");
    }
    let limited = alice.send(bob.user_id()?, 4, "limited").await;
    let code = limited.err().and_then(|s| code(&s)).unwrap_or_default();
    assert!(
        code.starts_with("FLOOD_WAIT_"),
        "the instance's own window still limits: {code}"
    );
    let diff = bob.difference(0).await?;
    assert_eq!(
        diff.new_messages.len(),
        3,
        "getDifference is the catch-up path"
    );
    Ok(())
}

/// A difference slice may hold up to its documented 1000 updates, new messages included; a
/// client's GetMessages is held to 200 ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_difference_carries_up_to_a_thousand_new_messages() -> anyhow::Result<()> {
    use oxigram_proto::api::v1::GetDifferenceRequest;

    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15554801", "Alice"), ("15554802", "Bob")])
        .await?;
    let bob_id = bob.user_id()?;
    let sends = (1..=250).map(|i| alice.send(bob_id, i, "one of many"));
    for sent in futures::future::join_all(sends).await {
        sent?;
    }
    let diff = bob
        .updates()
        .get_difference(GetDifferenceRequest {
            pts: 0,
            limit: 1000,
        })
        .await?
        .into_inner();
    assert_eq!(diff.updates.len(), 250);
    assert_eq!(diff.new_messages.len(), 250);
    assert!(!diff.is_slice);
    expect_code(
        bob.messages()
            .get_messages(GetMessagesRequest {
                ids: (1..=201).collect(),
            })
            .await,
        "LIMIT_INVALID",
    );
    let page = bob
        .messages()
        .get_messages(GetMessagesRequest {
            ids: (1..=200).collect(),
        })
        .await?
        .into_inner();
    assert_eq!(page.messages.len(), 200);
    Ok(())
}
