//! Editing a message through the gateway: the edit reaches every device of both owners, each in
//! her own ids, by push and by getDifference in pts order; history shows it on both sides; and
//! every refusal has its stable code and logs nothing.

use std::time::Duration;

use anyhow::Context;
use oxigram_proto::{
    api::v1::{BlockRequest, ForwardMessagesRequest},
    types::v1::{InputPeer, Message, PtsUpdate, update},
};
use oxigram_tests::{
    Mode, System, TestClient,
    client::{code, next_update, next_update_where},
    eventually,
};

/// The kind of an update and the message it carries, if any.
fn message_of(u: &PtsUpdate) -> (&'static str, Option<&Message>) {
    match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
        Some(update::Kind::NewMessage(n)) => ("new", n.message.as_ref()),
        Some(update::Kind::EditMessage(e)) => ("edit", e.message.as_ref()),
        Some(_) => ("other", None),
        None => ("none", None),
    }
}

/// Every update of `device`'s log after `pts`, checked to be contiguous, and the new messages
/// the difference names, in their current state.
async fn difference_after(
    device: &TestClient,
    pts: i32,
) -> anyhow::Result<(Vec<PtsUpdate>, Vec<Message>)> {
    let (slices, _) = device.full_difference(pts).await?;
    let mut updates = Vec::new();
    let mut current = Vec::new();
    for slice in slices {
        updates.extend(slice.updates);
        current.extend(slice.new_messages);
    }
    let mut at = pts;
    for u in &updates {
        assert_eq!(u.pts - u.pts_count, at, "the log is contiguous");
        at = u.pts;
    }
    Ok((updates, current))
}

/// An edit to try: (editor, peer, her box id, text).
type EditCase<'a> = (&'a TestClient, i64, i64, &'a str);

async fn pts_of(device: &TestClient) -> anyhow::Result<i32> {
    Ok(device.get_state().await?.pts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_reaches_both_owners_by_push_and_by_difference() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice] = system.users([("15558001", "Alice")]).await?;
    let (bob_phone, bob_laptop, bob_id) = system.user_on_two_devices("15558002", "Bob").await?;
    let alice_id = alice.user_id()?;
    // Bob's box ids run ahead of Alice's: each side's update names its own id.
    bob_phone.send(bob_id, 1, "a note to self").await?;
    let mut bob_stream = bob_phone.stream(0).await?;

    let sent = alice.send(bob_id, 1, "helo Bob").await?;
    let alice_box = sent.message.context("no message")?.id;
    let arrived = next_update_where(&mut bob_stream, |k| match k {
        update::Kind::NewMessage(n) => n.message,
        _ => None,
    })
    .await?;
    let bob_box = arrived.id;
    assert_eq!((alice_box, bob_box), (1, 2));

    let edited = alice.edit(bob_id, alice_box, "hello Bob").await?;
    let mine = edited.message.clone().context("no message")?;
    assert_eq!(
        (mine.id, mine.out, mine.text.as_str()),
        (alice_box, true, "hello Bob")
    );
    assert!(mine.edit_date > 0, "the edit has its date");
    assert_eq!((edited.pts, edited.pts_count), (2, 1));

    // Bob's online device: the edit, in his ids.
    let pushed = next_update(&mut bob_stream).await?;
    let (kind, m) = message_of(&pushed);
    let m = m.context("no message")?;
    assert_eq!(
        (kind, m.id, m.out, m.text.as_str(), m.edit_date),
        ("edit", bob_box, false, "hello Bob", mine.edit_date)
    );
    assert_eq!((pushed.pts, pushed.pts_count), (3, 1));

    // Bob's offline device: everything, in pts order, the edit last.
    let (bob_log, bob_current) = difference_after(&bob_laptop, 0).await?;
    let seen: Vec<(&str, i64, String)> = bob_log
        .iter()
        .map(|u| {
            let (kind, m) = message_of(u);
            (
                kind,
                m.map_or(0, |m| m.id),
                m.map(|m| m.text.clone()).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("new", 1, "a note to self".to_owned()),
            // Each update as it was logged; the new messages also in their current state.
            ("new", bob_box, "helo Bob".to_owned()),
            ("edit", bob_box, "hello Bob".to_owned()),
        ]
    );
    let now = bob_current
        .iter()
        .find(|m| m.id == bob_box)
        .context("the difference names the message")?;
    assert_eq!(
        (now.text.as_str(), now.edit_date),
        ("hello Bob", mine.edit_date)
    );
    // Alice's log: her message and its edit, in her ids.
    let (alice_log, _) = difference_after(&alice, 0).await?;
    let kinds: Vec<(&str, i64)> = alice_log
        .iter()
        .map(|u| {
            let (kind, m) = message_of(u);
            (kind, m.map_or(0, |m| m.id))
        })
        .collect();
    assert_eq!(kinds, [("new", alice_box), ("edit", alice_box)]);

    // History on both sides.
    for (device, peer, id) in [
        (&alice, bob_id, alice_box),
        (&bob_laptop, alice_id, bob_box),
    ] {
        let history = device.history(peer).await?;
        let m = history
            .iter()
            .find(|m| m.id == id)
            .context("the message is in history")?;
        assert_eq!(
            (m.text.as_str(), m.edit_date),
            ("hello Bob", mine.edit_date)
        );
    }

    // The same edit again changes nothing and logs nothing.
    let again = alice.edit(bob_id, alice_box, "hello Bob").await;
    assert_eq!(
        again.err().and_then(|s| code(&s)).as_deref(),
        Some("MESSAGE_NOT_MODIFIED")
    );
    assert_eq!(pts_of(&alice).await?, 2);
    assert_eq!(pts_of(&bob_laptop).await?, 3);
    assert!(difference_after(&alice, 2).await?.0.is_empty());

    // The dialogs projection went past the edit: a later message tops Bob's dialog, unread.
    let later = alice.send(bob_id, 2, "and more").await?;
    assert_eq!(later.pts, 3);
    let dialog = eventually(Duration::from_secs(10), "Bob's dialog moved on", || async {
        let page = bob_laptop.dialogs_page().await?;
        Ok(page
            .dialogs
            .into_iter()
            .find(|d| d.peer_user() == alice_id && d.top_message_id == bob_box + 1))
    })
    .await?;
    assert_eq!(dialog.unread_count, 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_edits_have_their_codes_and_log_nothing() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15558101", "Alice"), ("15558102", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    // Box 1 on both sides is Alice's message, box 2 Bob's answer.
    alice.send(bob_id, 1, "hi").await?;
    bob.send(alice_id, 1, "hey").await?;
    // Box 3 on both sides: Alice's forward of Bob's answer, which she did not write.
    alice
        .forward(ForwardMessagesRequest {
            from_peer: Some(InputPeer::user(bob_id)),
            ids: vec![2],
            random_ids: vec![2],
            to_peer: Some(InputPeer::user(bob_id)),
            ..Default::default()
        })
        .await?;
    let (alice_pts, bob_pts) = (pts_of(&alice).await?, pts_of(&bob).await?);

    let long = "x".repeat(4097);
    let table: [(EditCase, &str); 9] = [
        ((&alice, bob_id, 2, "not mine"), "MESSAGE_AUTHOR_REQUIRED"),
        ((&alice, bob_id, 3, "a forward"), "MESSAGE_AUTHOR_REQUIRED"),
        ((&bob, alice_id, 1, "not mine"), "MESSAGE_AUTHOR_REQUIRED"),
        ((&alice, bob_id, 1, "hi"), "MESSAGE_NOT_MODIFIED"),
        ((&alice, bob_id, 1, "   "), "MESSAGE_EMPTY"),
        ((&alice, bob_id, 1, &long), "MESSAGE_TOO_LONG"),
        ((&alice, bob_id, 99, "no such"), "MESSAGE_ID_INVALID"),
        ((&alice, bob_id, 0, "no such"), "MESSAGE_ID_INVALID"),
        ((&alice, 987_654_321, 1, "nobody"), "PEER_ID_INVALID"),
    ];
    for ((editor, peer, id, text), expected) in table {
        let got = editor.edit(peer, id, text).await;
        assert_eq!(
            got.err().and_then(|s| code(&s)).as_deref(),
            Some(expected),
            "edit of #{id} with {peer}"
        );
    }

    // A peer who blocked the author keeps her box as it is.
    bob.messages()
        .block(BlockRequest { user_id: alice_id })
        .await?;
    let blocked = alice.edit(bob_id, 1, "changed").await;
    assert_eq!(
        blocked.err().and_then(|s| code(&s)).as_deref(),
        Some("EDIT_MESSAGES_FORBIDDEN")
    );

    assert_eq!(
        (pts_of(&alice).await?, pts_of(&bob).await?),
        (alice_pts, bob_pts),
        "nothing was logged"
    );
    for (device, peer) in [(&alice, bob_id), (&bob, alice_id)] {
        let texts: Vec<(String, i64)> = device
            .history(peer)
            .await?
            .into_iter()
            .map(|m| (m.text, m.edit_date))
            .collect();
        let unchanged = [("hey", 0), ("hey", 0), ("hi", 0)].map(|(t, d)| (t.to_owned(), d));
        assert_eq!(texts, unchanged);
    }
    Ok(())
}
