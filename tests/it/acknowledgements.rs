//! The acknowledgements and cursors through the gateway: the reconnect lab, resends
//! after a lost response, gap-free pts under concurrency, and an offline device converging.

use std::{collections::BTreeMap, time::Duration};

use anyhow::Context;
use oxigram_proto::{
    api::v1::{AckRequest, Dialog, GetDeviceStateRequest, ReadHistoryRequest},
    types::v1::{InputPeer, PtsUpdate, update},
};
use oxigram_tests::{Mode, System, TestClient, client::next_update};

fn message_id(u: &PtsUpdate) -> Option<i64> {
    match u.update.as_ref()?.kind.as_ref()? {
        update::Kind::NewMessage(n) => n.message.as_ref().map(|m| m.id),
        _ => None,
    }
}

async fn pair(system: &System, a: &str, b: &str) -> anyhow::Result<(TestClient, TestClient)> {
    let mut alice = system.device().await?;
    alice.sign_up(a, "Alice").await?;
    let mut bob = system.device().await?;
    bob.sign_up(b, "Bob").await?;
    Ok((alice, bob))
}

/// The server holds messages 1..5; the device applied 1 and 2 but the server saw the
/// acknowledgement of 1 only; reconnecting from 1 delivers [2,3,4,5]; the device's store
/// shows exactly [1,2,3,4,5]. Then a resend after a lost response creates nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_lab() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let (alice, bob) = pair(&system, "15551001", "15551002").await?;
    let bob_id = bob.user_id()?;

    let mut delivered = Vec::new();
    let mut store = BTreeMap::new(); // the device's local store, keyed by message id
    let mut stream = bob.stream(0).await?;
    for (i, text) in ["one", "two"].iter().enumerate() {
        alice.send(bob_id, 100 + i as i64, text).await?;
        let u = next_update(&mut stream).await?;
        let id = message_id(&u).context("not a message")?;
        delivered.push(id);
        store.insert(id, u.pts);
    }
    // The device applied 1 and 2; only the acknowledgement of 1 reached the server.
    bob.updates().ack(AckRequest { pts: 1 }).await?;
    drop(stream);
    for (i, text) in ["three", "four", "five"].iter().enumerate() {
        alice.send(bob_id, 102 + i as i64, text).await?;
    }

    let from = bob
        .updates()
        .get_device_state(GetDeviceStateRequest {})
        .await?
        .into_inner()
        .acked_pts;
    assert_eq!(from, 1, "the server's cursor for this device");
    let mut stream = bob.stream(from).await?;
    let mut replayed = Vec::new();
    for _ in 0..4 {
        let u = next_update(&mut stream).await?;
        let id = message_id(&u).context("not a message")?;
        replayed.push(id);
        delivered.push(id);
        store.entry(id).or_insert(u.pts); // writes by unique id: a duplicate is ignored
    }
    assert_eq!(replayed, [2, 3, 4, 5]);
    assert_eq!(
        delivered,
        [1, 2, 2, 3, 4, 5],
        "delivered twice is a normal recovery"
    );
    assert_eq!(
        store.keys().copied().collect::<Vec<_>>(),
        [1, 2, 3, 4, 5],
        "displayed once"
    );

    // Alice's response to the fifth send was lost: she resends with the same random_id.
    let again = alice.send(bob_id, 104, "five").await?;
    assert_eq!(again.message.map(|m| m.id), Some(5), "the original message");
    let diff = bob.difference(5).await?;
    assert!(diff.updates.is_empty(), "nothing new for Bob");
    assert_eq!(bob.history(alice.user_id()?).await?.len(), 5);
    Ok(())
}

/// 200 concurrent sends to one user: her pts are exactly 1..=200, no gap, no duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sends_give_gap_free_pts() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let mut target = system.device().await?;
    let target_id = target.sign_up("15552000", "Target").await?.id;
    let mut senders = Vec::new();
    for i in 0..10 {
        let mut s = system.device().await?;
        s.sign_up(&format!("1555201{i:02}"), "Sender").await?;
        senders.push(s);
    }
    let sends = senders.iter().enumerate().flat_map(|(i, s)| {
        (0..20).map(move |j| async move {
            s.send(target_id, (i * 100 + j + 1) as i64, &format!("m{i}-{j}"))
                .await
        })
    });
    let results = futures::future::join_all(sends).await;
    for r in &results {
        r.as_ref()
            .map_err(|s| anyhow::anyhow!("send failed: {s}"))?;
    }
    let (slices, state) = target.full_difference(0).await?;
    assert!(
        slices.len() >= 2,
        "200 updates come in slices of at most 100"
    );
    let pts: Vec<i32> = slices
        .iter()
        .flat_map(|d| d.updates.iter().map(|u| u.pts))
        .collect();
    assert_eq!(pts, (1..=200).collect::<Vec<_>>());
    assert!(
        slices
            .iter()
            .all(|d| d.updates.iter().all(|u| u.pts_count == 1))
    );
    assert_eq!(state, 200);
    let mut ids: Vec<i64> = slices
        .iter()
        .flat_map(|d| d.new_messages.iter().map(|m| m.id))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        200,
        "200 distinct messages in the recipient's box"
    );
    Ok(())
}

/// What a device knows of one dialog, built only from the updates it applied.
#[derive(Debug, Default, Clone, PartialEq)]
struct DialogView {
    top: i64,
    read_inbox: i64,
    read_outbox: i64,
    unread: i32,
}

impl DialogView {
    /// The server's dialog, as a device's view would hold it.
    fn of(d: &Dialog) -> Self {
        Self {
            top: d.top_message_id,
            read_inbox: d.read_inbox_max_id,
            read_outbox: d.read_outbox_max_id,
            unread: d.unread_count,
        }
    }
}

fn apply(
    views: &mut BTreeMap<i64, DialogView>,
    messages: &mut BTreeMap<i64, String>,
    u: &PtsUpdate,
) {
    match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
        Some(update::Kind::NewMessage(n)) => {
            if let Some(m) = &n.message {
                messages.insert(m.id, m.text.clone());
                let v = views.entry(m.peer_user()).or_default();
                v.top = v.top.max(m.id);
                if !m.out && m.id > v.read_inbox {
                    v.unread += 1;
                }
            }
        }
        Some(update::Kind::ReadHistoryInbox(r)) => {
            let v = views.entry(r.peer_user()).or_default();
            v.read_inbox = r.max_id;
            v.unread = r.still_unread_count;
        }
        Some(update::Kind::ReadHistoryOutbox(r)) => {
            views.entry(r.peer_user()).or_default().read_outbox = r.max_id;
        }
        _ => {}
    }
}

/// Three devices of one user; one is offline through 50 sends and 10 reads on the others;
/// back online, getDifference brings it to exactly the server's state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_device_converges() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let (bob_phone, bob_laptop, bob_id) = system.user_on_two_devices("15553000", "Bob").await?;
    let mut bob_tablet = system.device().await?; // offline from here on
    bob_tablet.sign_in("15553000").await?;
    let mut alice = system.device().await?;
    let alice_id = alice.sign_up("15553001", "Alice").await?.id;
    let mut carol = system.device().await?;
    let carol_id = carol.sign_up("15553002", "Carol").await?.id;

    let mut reads = 0;
    for i in 0..50i64 {
        match i % 5 {
            0 | 1 => alice.send(bob_id, 1000 + i, &format!("a{i}")).await?,
            2 => carol.send(bob_id, 1000 + i, &format!("c{i}")).await?,
            3 => bob_phone.send(alice_id, 1000 + i, &format!("b{i}")).await?,
            _ => {
                bob_laptop
                    .send(carol_id, 1000 + i, &format!("b{i}"))
                    .await?
            }
        };
        if i % 5 == 4 {
            // Reads on the online devices, alternating, sometimes only part of the dialog.
            let (reader, peer) = if reads % 2 == 0 {
                (&bob_phone, alice_id)
            } else {
                (&bob_laptop, carol_id)
            };
            let max_id = if reads % 3 == 0 {
                0
            } else {
                reader.history(peer).await?.get(1).map_or(0, |m| m.id)
            };
            reader
                .messages()
                .read_history(ReadHistoryRequest {
                    peer: Some(InputPeer::user(peer)),
                    max_id,
                })
                .await?;
            reads += 1;
        }
    }
    assert_eq!(reads, 10);
    // Alice reads Bob's messages: Bob's outbox watermark moves for the tablet too.
    alice
        .messages()
        .read_history(ReadHistoryRequest {
            peer: Some(InputPeer::user(bob_id)),
            max_id: 0,
        })
        .await?;

    let (slices, _) = bob_tablet.full_difference(0).await?;
    let mut views = BTreeMap::new();
    let mut messages = BTreeMap::new();
    for d in &slices {
        for u in &d.updates {
            apply(&mut views, &mut messages, u);
        }
    }
    // The server's state, as the other devices see it.
    let server =
        oxigram_tests::eventually(Duration::from_secs(15), "dialogs to settle", || async {
            let page = bob_phone.dialogs_page().await?;
            // Dialogs apply events asynchronously: wait until they hold every message the
            // tablet has, then compare everything.
            let outbox_moved = page
                .dialogs
                .iter()
                .any(|d| d.peer_user() == alice_id && d.read_outbox_max_id > 0);
            let caught_up = page.dialogs.iter().all(|d| {
                views
                    .get(&d.peer_user())
                    .is_some_and(|v| v.top == d.top_message_id)
            });
            Ok((outbox_moved && caught_up).then_some(page))
        })
        .await?;
    for d in &server.dialogs {
        let mine = views.get(&d.peer_user()).cloned().unwrap_or_default();
        let theirs = DialogView::of(d);
        assert_eq!(
            mine,
            theirs,
            "the tablet's view of the dialog with {}",
            d.peer_user()
        );
    }
    assert_eq!(views.len(), server.dialogs.len());
    for peer in [alice_id, carol_id] {
        for m in bob_phone.history(peer).await? {
            assert_eq!(
                messages.get(&m.id),
                Some(&m.text),
                "message {} on the tablet",
                m.id
            );
        }
    }
    assert_eq!(messages.len(), 50);
    Ok(())
}

/// svc-dialogs learns of messages a second late here, yet a read made right after the sends
/// covers every message the reader's log holds, and counts the rest as unread: the reader's
/// devices (which apply the log) and the server agree at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_right_after_sends_covers_them() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.updates.dialogs_linger_ms = 1000;
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let (alice, bob) = pair(&system, "15554001", "15554002").await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    let read = |max_id: i64| {
        let bob = &bob;
        async move {
            anyhow::Ok(
                bob.messages()
                    .read_history(ReadHistoryRequest {
                        peer: Some(InputPeer::user(alice_id)),
                        max_id,
                    })
                    .await?
                    .into_inner(),
            )
        }
    };

    for i in 0..3 {
        alice.send(bob_id, 4000 + i, &format!("m{i}")).await?;
    }
    // max_id 0: everything the reader has.
    let first = read(0).await?;
    assert_eq!(
        first.pts_count, 1,
        "the read moved the watermark: {first:?}"
    );
    // Two more; the reader reads up to the first of them by id.
    for i in 3..5 {
        alice.send(bob_id, 4000 + i, &format!("m{i}")).await?;
    }
    let ids: Vec<i64> = bob.history(alice_id).await?.iter().map(|m| m.id).collect();
    anyhow::ensure!(ids.len() == 5, "bob's box: {ids:?}");
    let (newest, fourth, third) = (ids[0], ids[1], ids[2]);
    assert_eq!(read(fourth).await?.pts_count, 1);

    let mut views = BTreeMap::new();
    let mut messages = BTreeMap::new();
    let mut reads = Vec::new();
    for d in bob.full_difference(0).await?.0 {
        for u in &d.updates {
            apply(&mut views, &mut messages, u);
            if let Some(update::Kind::ReadHistoryInbox(r)) =
                u.update.as_ref().and_then(|u| u.kind.as_ref())
            {
                reads.push((r.max_id, r.still_unread_count));
            }
        }
    }
    assert_eq!(reads, vec![(third, 0), (fourth, 1)]);
    let page = bob.dialogs_page().await?;
    let dialog = page
        .dialogs
        .iter()
        .find(|d| d.peer_user() == alice_id)
        .context("bob's dialog with alice")?;
    let server = DialogView::of(dialog);
    assert_eq!(
        server,
        DialogView {
            top: newest,
            read_inbox: fourth,
            read_outbox: 0,
            unread: 1
        }
    );
    assert_eq!(views.get(&alice_id), Some(&server));
    Ok(())
}

/// Reads racing sends: Alice keeps sending while Bob keeps reading everything (max_id 0). Every
/// read update in Bob's log agrees with the messages before it there (its `still_unread_count`
/// counts exactly Alice's messages above its `max_id` logged before it), so a device that
/// applies the log ends with the unread count `GetDialogs` gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_racing_sends_agree_with_the_log() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let (alice, bob) = pair(&system, "15554101", "15554102").await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    alice.send(bob_id, 1, "first").await?;
    let sent = std::sync::atomic::AtomicBool::new(false);
    let reads_done = std::sync::atomic::AtomicUsize::new(0);
    let sending = async {
        // Four streams of sends, so messages keep arriving while each read is under way: each
        // sends 50 and goes on (up to 900) until Bob has read a few times, however slow the
        // reads are on a loaded machine.
        let streams = (0..4i64).map(|s| {
            let (alice, reads_done) = (&alice, &reads_done);
            async move {
                for i in 0..900 {
                    if i >= 50 && reads_done.load(std::sync::atomic::Ordering::Relaxed) >= 8 {
                        break;
                    }
                    alice.send(bob_id, 10 + s * 1000 + i, "racing").await?;
                }
                anyhow::Ok(())
            }
        });
        let outcome = futures::future::try_join_all(streams).await;
        sent.store(true, std::sync::atomic::Ordering::Relaxed);
        outcome
    };
    let reading = async {
        while !sent.load(std::sync::atomic::Ordering::Relaxed) {
            bob.messages()
                .read_history(ReadHistoryRequest {
                    peer: Some(InputPeer::user(alice_id)),
                    max_id: 0,
                })
                .await?;
            reads_done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        anyhow::Ok(())
    };
    tokio::try_join!(sending, reading)?;

    // Bob's device applies his whole log in order, as a client does.
    let (slices, _) = bob.full_difference(0).await?;
    let (mut incoming, mut read_max, mut unread, mut reads) = (Vec::new(), 0i64, 0i64, 0);
    for u in slices.iter().flat_map(|d| &d.updates) {
        match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
            Some(update::Kind::NewMessage(n)) => {
                let m = n.message.as_ref().context("no message")?;
                if !m.out && m.peer_user() == alice_id {
                    incoming.push(m.id);
                    if m.id > read_max {
                        unread += 1;
                    }
                }
            }
            Some(update::Kind::ReadHistoryInbox(r)) if r.peer_user() == alice_id => {
                reads += 1;
                let before = incoming.iter().filter(|id| **id > r.max_id).count() as i64;
                assert_eq!(
                    i64::from(r.still_unread_count),
                    before,
                    "the read at pts {} (max_id {}) counts the messages before it in the log",
                    u.pts,
                    r.max_id
                );
                read_max = read_max.max(r.max_id);
                unread = i64::from(r.still_unread_count);
            }
            _ => {}
        }
    }
    assert!(reads >= 5, "reads logged: {reads}");
    let dialog = bob
        .dialogs_page()
        .await?
        .dialogs
        .into_iter()
        .find(|d| d.peer_user() == alice_id)
        .context("no dialog with Alice")?;
    assert_eq!(
        (i64::from(dialog.unread_count), dialog.read_inbox_max_id),
        (unread, read_max),
        "the device's view equals GetDialogs"
    );
    Ok(())
}
