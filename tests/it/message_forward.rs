//! Forwarding through the gateway: a forward is a send of the source's content, so it reaches
//! every device of both owners, by push and by getDifference, and shows in history on both
//! sides, each time with its forward header (the first author's, however often it is
//! forwarded on); a retry with the same keys returns the same messages; Saved Messages name
//! where a message was saved from; and every refusal has its stable code and sends nothing.

use anyhow::Context;
use oxigram_proto::{
    api::v1::{BlockRequest, ForwardMessagesRequest, GetHistoryRequest},
    types::v1::{InputPeer, Message, PtsUpdate, SendMessageRequest, update},
};
use oxigram_tests::{
    Mode, System, TestClient,
    client::{code, next_update_where},
};

/// A forward of `ids` from the dialog `from` to `to`, keys from `first_key` up.
fn forward_of(
    from: InputPeer,
    ids: &[i64],
    to: InputPeer,
    first_key: i64,
) -> ForwardMessagesRequest {
    ForwardMessagesRequest {
        from_peer: Some(from),
        ids: ids.to_vec(),
        random_ids: (first_key..).take(ids.len()).collect(),
        to_peer: Some(to),
        ..Default::default()
    }
}

/// A message's forward header as (author, date, id, saved from peer, saved from id).
fn header(m: &Message) -> Option<(i64, i64, i64, i64, i64)> {
    m.fwd_from.map(|h| {
        (
            h.from_user_id,
            h.date,
            h.msg_id,
            h.saved_from_peer.and_then(|p| p.user_id()).unwrap_or(0),
            h.saved_from_msg_id,
        )
    })
}

fn new_message(u: &PtsUpdate) -> Option<&Message> {
    match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
        Some(update::Kind::NewMessage(n)) => n.message.as_ref(),
        _ => None,
    }
}

async fn pts_of(device: &TestClient) -> anyhow::Result<i32> {
    Ok(device.get_state().await?.pts)
}

/// The messages `device`'s difference after `pts` names, in their current state.
async fn difference_messages(device: &TestClient, pts: i32) -> anyhow::Result<Vec<Message>> {
    let (slices, _) = device.full_difference(pts).await?;
    Ok(slices.into_iter().flat_map(|s| s.new_messages).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_reaches_both_owners_with_the_first_authors_header() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, carol] = system
        .users([("15559001", "Alice"), ("15559003", "Carol")])
        .await?;
    let (bob_phone, bob_laptop, bob_id) = system.user_on_two_devices("15559002", "Bob").await?;
    let (alice_id, carol_id) = (alice.user_id()?, carol.user_id()?);

    let original = alice.send(bob_id, 1, "pass it on").await?;
    let original = original.message.context("no message")?;
    let first = Some((alice_id, original.date, 1, 0, 0));
    let carol_pts = pts_of(&carol).await?;
    let mut bob_laptop_stream = bob_laptop.stream(pts_of(&bob_laptop).await?).await?;
    let mut carol_stream = carol.stream(carol_pts).await?;

    // Bob forwards Alice's message (his box 1) to Carol from his phone.
    let forwarded = bob_phone
        .forward(forward_of(
            InputPeer::user(alice_id),
            &[1],
            InputPeer::user(carol_id),
            1,
        ))
        .await?;
    let [sent] = &forwarded[..] else {
        anyhow::bail!("one answer per id: {forwarded:?}");
    };
    let mine = sent.message.clone().context("no message")?;
    assert_eq!(
        (mine.id, mine.out, mine.peer_user(), mine.from_user_id),
        (2, true, carol_id, bob_id)
    );
    assert_eq!((mine.text.as_str(), header(&mine)), ("pass it on", first));
    assert_eq!((sent.pts, sent.pts_count), (2, 1));

    // Bob's other device and Carol's, by push: the message in each owner's view, with the header.
    let on_laptop = next_update_where(&mut bob_laptop_stream, |k| match k {
        update::Kind::NewMessage(n) => n.message,
        _ => None,
    })
    .await?;
    assert_eq!(on_laptop, mine);
    let at_carol = next_update_where(&mut carol_stream, |k| match k {
        update::Kind::NewMessage(n) => n.message,
        _ => None,
    })
    .await?;
    assert_eq!(
        (
            at_carol.id,
            at_carol.out,
            at_carol.from_user_id,
            header(&at_carol)
        ),
        (1, false, bob_id, first)
    );
    // By getDifference, logged and current, and in history on both sides.
    let (slices, _) = carol.full_difference(carol_pts).await?;
    let logged: Vec<Option<_>> = slices
        .iter()
        .flat_map(|s| &s.updates)
        .filter_map(new_message)
        .map(header)
        .collect();
    assert_eq!(logged, [first]);
    for (device, peer, id) in [(&carol, bob_id, 1), (&bob_laptop, carol_id, 2)] {
        let history = device.history(peer).await?;
        let m = history.iter().find(|m| m.id == id).context("in history")?;
        assert_eq!((m.text.as_str(), header(m)), ("pass it on", first));
        let current = difference_messages(device, 0).await?;
        let m = current
            .iter()
            .find(|m| m.id == id)
            .context("in the difference")?;
        assert_eq!(header(m), first);
    }

    // A page names the original author among its users, for the header to show her.
    let page = carol
        .get_history(GetHistoryRequest {
            peer: Some(InputPeer::user(bob_id)),
            limit: 10,
            ..Default::default()
        })
        .await?;
    assert!(page.users.iter().any(|u| u.id == alice_id), "{page:?}");

    // The same call again: the same message, no new update.
    let again = bob_phone
        .forward(forward_of(
            InputPeer::user(alice_id),
            &[1],
            InputPeer::user(carol_id),
            1,
        ))
        .await?;
    assert_eq!(again.first().and_then(|s| s.message.clone()), Some(mine));
    assert_eq!(pts_of(&bob_phone).await?, 2);
    assert_eq!(pts_of(&carol).await?, carol_pts + 1);

    // Carol forwards the forward on to Alice: Alice stays the author.
    let on = carol
        .forward(forward_of(
            InputPeer::user(bob_id),
            &[1],
            InputPeer::user(alice_id),
            1,
        ))
        .await?;
    let on = on
        .first()
        .and_then(|s| s.message.clone())
        .context("no message")?;
    assert_eq!(header(&on), first);
    let at_alice = alice.history(carol_id).await?;
    assert_eq!(
        at_alice
            .iter()
            .map(|m| (m.from_user_id, m.out, header(m)))
            .collect::<Vec<_>>(),
        [(carol_id, false, first)]
    );
    // Without the author: Carol's own message.
    let dropped = carol
        .forward(ForwardMessagesRequest {
            drop_author: true,
            ..forward_of(InputPeer::user(bob_id), &[1], InputPeer::user(alice_id), 2)
        })
        .await?;
    let dropped = dropped
        .first()
        .and_then(|s| s.message.clone())
        .context("no message")?;
    assert_eq!(
        (
            dropped.from_user_id,
            dropped.text.as_str(),
            header(&dropped)
        ),
        (carol_id, "pass it on", None)
    );
    // Into Saved Messages: the first author, and the dialog and id it was saved from.
    let saved = carol
        .forward(forward_of(
            InputPeer::user(bob_id),
            &[1],
            InputPeer::me(),
            3,
        ))
        .await?;
    let saved = saved
        .first()
        .and_then(|s| s.message.clone())
        .context("no message")?;
    let saved_from = Some((alice_id, original.date, 1, bob_id, 1));
    assert_eq!((saved.peer_user(), header(&saved)), (carol_id, saved_from));
    let notes = carol.history(carol_id).await?;
    assert_eq!(notes.iter().map(header).collect::<Vec<_>>(), [saved_from]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_forwards_have_their_codes_and_send_nothing() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob, carol] = system
        .users([
            ("15559101", "Alice"),
            ("15559102", "Bob"),
            ("15559103", "Carol"),
        ])
        .await?;
    let (alice_id, bob_id, carol_id) = (alice.user_id()?, bob.user_id()?, carol.user_id()?);
    // Bob's boxes: 1 free, 2 protected, both from Alice; 3 his own message to Carol (key 7).
    alice.send(bob_id, 1, "free").await?;
    alice
        .send_message(SendMessageRequest {
            peer: Some(InputPeer::user(bob_id)),
            random_id: 2,
            text: "protected".into(),
            noforwards: true,
            ..Default::default()
        })
        .await?;
    bob.send(carol_id, 7, "hi carol").await?;
    let before = (pts_of(&bob).await?, pts_of(&carol).await?);

    let (from, to) = (InputPeer::user(alice_id), InputPeer::user(carol_id));
    let many: Vec<i64> = (1..=101).collect();
    let table: Vec<(ForwardMessagesRequest, &str)> = vec![
        (forward_of(from, &[2], to, 10), "CHAT_FORWARDS_RESTRICTED"),
        // One protected message refuses the whole call.
        (
            forward_of(from, &[1, 2], to, 10),
            "CHAT_FORWARDS_RESTRICTED",
        ),
        (forward_of(from, &[99], to, 10), "MESSAGE_ID_INVALID"),
        (forward_of(from, &[1, 99], to, 10), "MESSAGE_ID_INVALID"),
        // Box 3 is in the dialog with Carol, not Alice.
        (forward_of(from, &[3], to, 10), "MESSAGE_ID_INVALID"),
        (forward_of(from, &[], to, 10), "MESSAGE_IDS_EMPTY"),
        (forward_of(from, &many, to, 10), "LIMIT_INVALID"),
        (
            ForwardMessagesRequest {
                random_ids: vec![10],
                ..forward_of(from, &[1, 1], to, 10)
            },
            "RANDOM_ID_INVALID",
        ),
        (
            ForwardMessagesRequest {
                random_ids: vec![10, 10],
                ..forward_of(from, &[1, 1], to, 10)
            },
            "RANDOM_ID_INVALID",
        ),
        (
            forward_of(from, &[1], InputPeer::user(987_654_321), 10),
            "PEER_ID_INVALID",
        ),
        (
            ForwardMessagesRequest {
                to_peer: None,
                ..forward_of(from, &[1], to, 10)
            },
            "PEER_ID_INVALID",
        ),
        (
            ForwardMessagesRequest {
                from_peer: None,
                ..forward_of(from, &[1], to, 10)
            },
            "PEER_ID_INVALID",
        ),
        // Key 7 sent Bob's own message: a forward with it is another message, and key 6
        // beside it is not used either.
        (forward_of(from, &[1, 1], to, 6), "RANDOM_ID_DUPLICATE"),
    ];
    for (request, expected) in table {
        let got = bob.forward(request.clone()).await;
        assert_eq!(
            got.err().and_then(|s| code(&s)).as_deref(),
            Some(expected),
            "{request:?}"
        );
    }
    assert_eq!(
        (pts_of(&bob).await?, pts_of(&carol).await?),
        before,
        "nothing was logged"
    );
    assert_eq!(carol.history(bob_id).await?.len(), 1);

    // Towards a user who blocked him, a forward is a send: his box only, nothing at Carol's.
    carol
        .messages()
        .block(BlockRequest { user_id: bob_id })
        .await?;
    let blocked = bob.forward(forward_of(from, &[1], to, 20)).await?;
    let m = blocked
        .first()
        .and_then(|s| s.message.clone())
        .context("no message")?;
    assert_eq!(
        (m.id, m.peer_user(), header(&m).map(|h| h.0)),
        (4, carol_id, Some(alice_id))
    );
    assert_eq!(pts_of(&bob).await?, before.0 + 1);
    assert_eq!(pts_of(&carol).await?, before.1);
    assert_eq!(carol.history(bob_id).await?.len(), 1);
    Ok(())
}
