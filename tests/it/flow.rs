//! The walking skeleton's one flow, through every service, in single-binary mode and with
//! every service as its own process: two users, three devices; A sends B a text; B's online
//! device gets it on its stream (through dispatch), B's offline device from getDifference, and
//! both users' dialogs show it.

use std::time::Duration;

use anyhow::Context;
use oxigram_proto::types::v1::update;
use oxigram_tests::{Mode, System, client::next_update, eventually};

fn text_of(u: &oxigram_proto::types::v1::PtsUpdate) -> Option<(i64, String, bool)> {
    match u.update.as_ref()?.kind.as_ref()? {
        update::Kind::NewMessage(n) => n.message.as_ref().map(|m| (m.id, m.text.clone(), m.out)),
        _ => None,
    }
}

async fn one_flow(mode: Mode) -> anyhow::Result<()> {
    let system = System::start(mode).await?;
    let mut alice = system.device().await?;
    let alice_id = alice.sign_up("15550001", "Alice").await?.id;
    let mut bob_phone = system.device().await?;
    let bob_id = bob_phone.sign_up("15550002", "Bob").await?.id;
    let mut bob_laptop = system.device().await?;
    assert_eq!(
        bob_laptop.sign_in("+15550002").await?.id,
        bob_id,
        "one account, two devices"
    );

    // Online: Bob's phone and Alice's own device listen; Bob's laptop stays offline.
    let mut bob_stream = bob_phone.stream(0).await?;
    let mut alice_stream = alice.stream(0).await?;

    let sent = alice.send(bob_id, 1001, "hello Bob").await?;
    let message = sent.message.context("no message")?;
    assert_eq!(
        (message.id, message.text.as_str(), message.out),
        (1, "hello Bob", true)
    );
    assert_eq!(
        (sent.pts, sent.pts_count),
        (1, 1),
        "the fast path carried Alice's pts"
    );

    let pushed = next_update(&mut bob_stream).await?;
    assert_eq!((pushed.pts, pushed.pts_count), (1, 1));
    assert_eq!(text_of(&pushed), Some((1, "hello Bob".into(), false)));

    let diff = bob_laptop.difference(0).await?;
    assert_eq!(diff.updates.len(), 1);
    assert_eq!(diff.state.map(|s| s.pts), Some(1));
    assert_eq!(diff.new_messages.len(), 1);
    assert_eq!(diff.new_messages[0].text, "hello Bob");
    assert_eq!(diff.new_messages[0].from_user_id, alice_id);

    // Bob answers: Alice's stream gets Bob's message as its first event, so her own send was
    // never pushed back to the session that made it.
    let reply = bob_laptop.send(alice_id, 2002, "hi Alice").await?;
    assert_eq!(reply.pts, 2, "Bob's second update");
    let first_for_alice = next_update(&mut alice_stream).await?;
    assert_eq!(
        text_of(&first_for_alice),
        Some((2, "hi Alice".into(), false))
    );
    assert_eq!(first_for_alice.pts, 2);
    // The phone (not the sending laptop) gets Bob's own message as update pts 2.
    let own = next_update(&mut bob_stream).await?;
    assert_eq!(text_of(&own), Some((2, "hi Alice".into(), true)));

    // Dialogs are fed asynchronously by the same events.
    let alice_dialog = eventually(Duration::from_secs(15), "Alice's dialog", || async {
        let page = alice.dialogs_page().await?;
        Ok(page
            .dialogs
            .iter()
            .find(|d| d.peer_user() == bob_id && d.top_message_id == 2)
            .cloned()
            .map(|d| (d, page)))
    })
    .await?;
    assert_eq!(
        alice_dialog.0.unread_count, 1,
        "Bob's reply is unread for Alice"
    );
    assert!(
        alice_dialog
            .1
            .messages
            .iter()
            .any(|m| m.id == 2 && m.text == "hi Alice")
    );
    assert!(
        alice_dialog
            .1
            .users
            .iter()
            .any(|u| u.id == bob_id && u.first_name == "Bob")
    );
    let bob_dialog = eventually(Duration::from_secs(15), "Bob's dialog", || async {
        let page = bob_phone.dialogs_page().await?;
        Ok(page
            .dialogs
            .into_iter()
            .find(|d| d.peer_user() == alice_id && d.top_message_id == 2))
    })
    .await?;
    assert_eq!(
        bob_dialog.unread_count, 1,
        "Alice's message is unread, Bob's own reply is not"
    );

    let history = bob_phone.history(alice_id).await?;
    let texts: Vec<&str> = history.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(
        texts,
        ["hi Alice", "hello Bob"],
        "newest first, Bob's own ids"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_in_one_process() -> anyhow::Result<()> {
    one_flow(Mode::OneProcess).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_with_a_process_per_service() -> anyhow::Result<()> {
    one_flow(Mode::Processes).await
}
