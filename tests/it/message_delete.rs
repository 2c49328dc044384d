//! Deleting messages through the gateway: the owner's view alone by default, both sides with
//! revoke (every device of each, by push and by getDifference), never past a block; clearing
//! a dialog in bounded batches; dialogs' top messages and unread counts recomputed, a cleared
//! dialog leaving the list until a new message (or staying, empty, with just_clear); and a
//! deleted message never shown again: not in history, GetMessages, getDifference or search.

use anyhow::Context;
use oxigram_proto::{
    api::v1::{BlockRequest, GetMessagesRequest, SearchRequest},
    types::v1::{InputPeer, PtsUpdate, update},
};
use oxigram_tests::{
    Mode, System, TestClient,
    client::{code, dialog_when, next_update},
};

/// The ids of a delete update, if it is one.
fn deleted_ids(u: &PtsUpdate) -> Option<Vec<i64>> {
    match u.update.as_ref()?.kind.as_ref()? {
        update::Kind::DeleteMessages(d) => Some(d.ids.clone()),
        _ => None,
    }
}

async fn history_ids(device: &TestClient, peer: i64) -> anyhow::Result<Vec<i64>> {
    Ok(device.history(peer).await?.iter().map(|m| m.id).collect())
}

/// Every update of `device`'s log after `pts`, checked to be contiguous.
async fn log_after(device: &TestClient, pts: i32) -> anyhow::Result<Vec<PtsUpdate>> {
    let (slices, _) = device.full_difference(pts).await?;
    let mut updates = Vec::new();
    let mut at = pts;
    for slice in slices {
        assert!(
            slice.new_messages.iter().all(|m| !m.text.contains("gone")),
            "no deleted message among the difference's messages"
        );
        for u in slice.updates {
            assert_eq!(u.pts - u.pts_count, at, "the log is contiguous");
            at = u.pts;
            updates.push(u);
        }
    }
    Ok(updates)
}

/// The delete updates of a log, each as its ids.
fn deletes(log: &[PtsUpdate]) -> Vec<Vec<i64>> {
    log.iter().filter_map(deleted_ids).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_is_the_owners_alone_and_a_revoke_reaches_every_device_of_both()
-> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice] = system.users([("15559001", "Alice")]).await?;
    let (bob_phone, bob_laptop, bob_id) = system.user_on_two_devices("15559002", "Bob").await?;
    let alice_id = alice.user_id()?;
    for (n, text) in [(1, "gone one"), (2, "gone two"), (3, "gone three")] {
        alice.send(bob_id, n, text).await?;
    }
    let mut bob_stream = bob_phone.stream(3).await?;

    // Alice's view only: Bob keeps the message and hears of nothing.
    let mine = alice.delete(&[1, 1, 0, 99], false).await?;
    assert_eq!((mine.pts, mine.pts_count), (4, 1));
    assert_eq!(history_ids(&alice, bob_id).await?, [3, 2]);
    assert_eq!(history_ids(&bob_laptop, alice_id).await?, [3, 2, 1]);

    // A revoke: Bob's phone gets the delete pushed, in his ids, and his history loses it.
    let revoked = alice.delete(&[2], true).await?;
    assert_eq!((revoked.pts, revoked.pts_count), (5, 1));
    let pushed = next_update(&mut bob_stream).await?;
    assert_eq!(
        (deleted_ids(&pushed), pushed.pts, pushed.pts_count),
        (Some(vec![2]), 4, 1),
        "the first update Bob gets is the revoke"
    );
    assert_eq!(history_ids(&bob_laptop, alice_id).await?, [3, 1]);

    // Bob revokes two: Alice lost one of them already, so her update names the other only.
    let bobs = bob_laptop.delete(&[1, 3], true).await?;
    assert_eq!((bobs.pts, bobs.pts_count), (6, 2));
    let pushed = next_update(&mut bob_stream).await?;
    assert_eq!(
        (deleted_ids(&pushed), pushed.pts_count),
        (Some(vec![1, 3]), 2),
        "the other device of the deleter hears of it too"
    );
    for (device, peer) in [(&alice, bob_id), (&bob_phone, alice_id)] {
        assert_eq!(history_ids(device, peer).await?, Vec::<i64>::new());
    }

    // Deleted messages never come back: GetMessages, search, getDifference.
    let by_id = alice
        .messages()
        .get_messages(GetMessagesRequest { ids: vec![1, 2, 3] })
        .await?
        .into_inner();
    assert!(by_id.messages.is_empty(), "GetMessages: {by_id:?}");
    let found = bob_phone
        .messages()
        .search(SearchRequest {
            q: "gone".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    assert!(found.messages.is_empty(), "search: {found:?}");
    let alice_log = log_after(&alice, 0).await?;
    assert_eq!(deletes(&alice_log), [vec![1], vec![2], vec![3]]);
    let bob_log = log_after(&bob_phone, 0).await?;
    assert_eq!(deletes(&bob_log), [vec![2], vec![1, 3]]);
    for u in alice_log.iter().chain(&bob_log) {
        if let Some(update::Kind::NewMessage(n)) = u.update.as_ref().and_then(|u| u.kind.as_ref()) {
            assert!(n.message.is_none(), "pts {}: {:?}", u.pts, n.message);
        }
    }
    // Nothing left, nothing to delete: the answer is the state, no update.
    let again = alice.delete(&[1, 2, 3], true).await?;
    assert_eq!((again.pts, again.pts_count), (6, 0));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_deletes_have_their_codes_and_change_nothing() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15559101", "Alice"), ("15559102", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    alice.send(bob_id, 1, "hi").await?;
    bob.messages()
        .block(BlockRequest { user_id: alice_id })
        .await?;
    let pts = (alice.get_state().await?.pts, bob.get_state().await?.pts);

    let too_many: Vec<i64> = (1..=1001).collect();
    let user = |id| Some(InputPeer::user(id));
    let deletes = [
        (
            alice.delete(&too_many, false).await.err(),
            "MESSAGE_IDS_TOO_MANY",
        ),
        (
            alice.delete(&[1], true).await.err(),
            "DELETE_MESSAGES_FORBIDDEN",
        ),
    ];
    let clears = [
        (
            alice.clear_batch(None, 0, false, false).await.err(),
            "PEER_ID_INVALID",
        ),
        (
            alice.clear_batch(user(0), 0, false, false).await.err(),
            "PEER_ID_INVALID",
        ),
        (
            alice
                .clear_batch(user(987_654_321), 0, false, false)
                .await
                .err(),
            "PEER_ID_INVALID",
        ),
        (
            alice
                .clear_batch(user(bob_id), -1, false, false)
                .await
                .err(),
            "MESSAGE_ID_INVALID",
        ),
        (
            alice.clear_batch(user(bob_id), 0, false, true).await.err(),
            "DELETE_MESSAGES_FORBIDDEN",
        ),
    ];
    for (i, (got, expected)) in deletes.into_iter().chain(clears).enumerate() {
        assert_eq!(
            got.and_then(|s| code(&s)).as_deref(),
            Some(expected),
            "row {i}"
        );
    }
    assert_eq!(
        (alice.get_state().await?.pts, bob.get_state().await?.pts),
        pts,
        "nothing was logged"
    );
    assert_eq!(history_ids(&alice, bob_id).await?, [1]);

    // Without revoke the block does not matter: Alice's own view is hers.
    let own = alice.delete(&[1], false).await?;
    assert_eq!((own.pts, own.pts_count), (pts.0 + 1, 1));
    assert_eq!(history_ids(&alice, bob_id).await?, Vec::<i64>::new());
    assert_eq!(history_ids(&bob, alice_id).await?, [1]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_is_cleared_in_batches_and_the_dialog_leaves_until_a_new_message()
-> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob, carol] = system
        .users([
            ("15559201", "Alice"),
            ("15559202", "Bob"),
            ("15559203", "Carol"),
        ])
        .await?;
    let (alice_id, bob_id, carol_id) = (alice.user_id()?, bob.user_id()?, carol.user_id()?);
    // 1100 messages from Bob, sent 50 at a time; one from Carol.
    let total = 1100;
    let bob = &bob;
    for chunk in (1..=total).collect::<Vec<i64>>().chunks(50) {
        let sends = chunk
            .iter()
            .map(|&n| async move { bob.send(alice_id, n, &format!("gone {n}")).await });
        for sent in futures::future::join_all(sends).await {
            sent?;
        }
    }
    carol.send(alice_id, 1, "from Carol").await?;
    dialog_when(&alice, bob_id, "Bob's messages applied", |d| {
        d.is_some_and(|d| d.unread_count == total as i32)
    })
    .await?;
    let before = alice.get_state().await?.pts;

    // Two batches: 1000, then the 100 left.
    let batches = alice.clear(bob_id, false, false).await?;
    let shape: Vec<(i32, i32, i64)> = batches
        .iter()
        .map(|b| (b.pts, b.pts_count, b.offset))
        .collect();
    assert_eq!(shape, [(before + 1000, 1000, 1), (before + 1100, 100, 0)]);
    assert_eq!(history_ids(&alice, bob_id).await?, Vec::<i64>::new());
    assert_eq!(
        history_ids(bob, alice_id).await?.len(),
        100,
        "Bob keeps his"
    );
    let log = log_after(&alice, before).await?;
    let sizes: Vec<usize> = deletes(&log).iter().map(Vec::len).collect();
    assert_eq!(sizes, [1000, 100]);

    // Nothing left: the dialog leaves Alice's list; Carol's stays.
    dialog_when(&alice, bob_id, "the cleared dialog is gone", |d| {
        d.is_none()
    })
    .await?;
    let carols = dialog_when(&alice, carol_id, "Carol's dialog", |d| d.is_some()).await?;
    assert_eq!(carols.map(|d| d.unread_count), Some(1));

    // A new message brings it back, with that message on top and unread alone.
    let sent = bob.send(alice_id, total + 1, "back again").await?;
    let back = dialog_when(&alice, bob_id, "the dialog is back", |d| {
        d.is_some_and(|d| d.top_message_id > 0)
    })
    .await?
    .context("listed")?;
    assert_eq!(
        (back.top_message_id, back.unread_count),
        (total + 2, 1),
        "Alice's box ids go on after the cleared ones ({sent:?})"
    );

    // just_clear: Carol's dialog stays in the list, empty and read.
    let kept = alice.clear(carol_id, true, false).await?;
    assert_eq!(kept.len(), 1);
    let empty = dialog_when(&alice, carol_id, "Carol's dialog emptied", |d| {
        d.is_some_and(|d| d.top_message_id == 0)
    })
    .await?
    .context("listed")?;
    assert_eq!(empty.unread_count, 0);
    Ok(())
}

/// Who deletes which of her ids, whether she revokes, and Alice's dialog after it: (top,
/// unread).
type DeleteStep<'a> = (&'a TestClient, &'a [i64], bool, (i64, i32));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_unread_messages_stop_counting() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15559301", "Alice"), ("15559302", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    for n in 1..=5 {
        bob.send(alice_id, n, &format!("message {n}")).await?;
    }
    dialog_when(&alice, bob_id, "five unread", |d| {
        d.is_some_and(|d| d.unread_count == 5)
    })
    .await?;
    alice.read_history(InputPeer::user(bob_id), 2).await?;
    // (who deletes what, revoke; Alice's dialog after it: top, unread)
    let steps: [DeleteStep; 3] = [
        // An unread message of hers.
        (&alice, &[4], false, (5, 2)),
        // A read one: the count stays.
        (&alice, &[1], false, (5, 2)),
        // Bob revokes the newest: her top goes back to 3, one unread left.
        (&bob, &[5], true, (3, 1)),
    ];
    for (i, (device, ids, revoke, (top, unread))) in steps.into_iter().enumerate() {
        device.delete(ids, revoke).await?;
        dialog_when(&alice, bob_id, &format!("step {i}"), |d| {
            d.is_some_and(|d| (d.top_message_id, d.unread_count) == (top, unread))
        })
        .await?;
    }
    // Reading everything reads what is left: nothing unread.
    alice.read_history(InputPeer::user(bob_id), 0).await?;
    let read = dialog_when(&alice, bob_id, "all read", |d| {
        d.is_some_and(|d| d.unread_count == 0)
    })
    .await?
    .context("listed")?;
    assert_eq!((read.top_message_id, read.read_inbox_max_id), (3, 3));
    Ok(())
}
