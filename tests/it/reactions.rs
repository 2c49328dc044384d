//! Reactions in private chats through the gateway: a reaction reaches every device of both
//! owners in each owner's ids (by push and by getDifference), history shows it, the author's
//! dialog counts it unread until ReadReactions (which her other devices learn), a replacement
//! keeps one reaction per user, a removal before the read takes the unread back, and bad
//! requests get their codes; a Telegram client reacts on the MTProto door and learns of the
//! peer's reactions live and by getDifference.

use oxigram_proto::types::v1::{
    InputPeer, PtsUpdate, ReactionCount, UpdateMessageReactions, UpdateReadReactions, update,
};
use oxigram_tests::{
    Mode, System, TestClient,
    client::{dialog_when, in_history, next_update_where},
};

fn reactions_update(kind: update::Kind) -> Option<UpdateMessageReactions> {
    match kind {
        update::Kind::MessageReactions(u) => Some(u),
        _ => None,
    }
}

fn read_update(kind: update::Kind) -> Option<UpdateReadReactions> {
    match kind {
        update::Kind::ReadReactions(u) => Some(u),
        _ => None,
    }
}

fn counts(reactions: &[ReactionCount]) -> Vec<(&str, i32, bool)> {
    reactions
        .iter()
        .map(|r| (r.reaction.as_str(), r.count, r.chosen_by_me))
        .collect()
}

/// The reaction updates of `device`'s log after `pts`, with their place in it.
async fn reactions_in_log(
    device: &TestClient,
    pts: i32,
) -> anyhow::Result<Vec<(PtsUpdate, update::Kind)>> {
    let (slices, _) = device.full_difference(pts).await?;
    Ok(slices
        .into_iter()
        .flat_map(|s| s.updates)
        .filter_map(|u| {
            let kind = u.update.clone()?.kind?;
            matches!(
                kind,
                update::Kind::MessageReactions(_) | update::Kind::ReadReactions(_)
            )
            .then_some((u, kind))
        })
        .collect())
}

/// `device`'s count of unread reactions in its dialog with `peer`, once it is `want`.
async fn unread_reactions_become(device: &TestClient, peer: i64, want: i32) -> anyhow::Result<()> {
    dialog_when(device, peer, &format!("{want} unread reactions"), |d| {
        d.is_some_and(|d| d.unread_reactions_count == want)
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaction_reaches_both_owners_and_is_unread_for_the_author_until_read()
-> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice] = system.users([("15558401", "Alice")]).await?;
    let ([bob, bob_laptop], bob_id) = system.user_on_devices("15558402", "Bob").await?;
    let alice_id = alice.user_id()?;
    alice.send(bob_id, 1, "first from Alice").await?;
    let bobs = bob.send(alice_id, 1, "Bob's message").await?;
    let bob_msg = bobs.message.map(|m| m.id).unwrap_or_default();
    // Alice's id of Bob's message: her newest.
    let alice_msg = alice
        .history(bob_id)
        .await?
        .first()
        .map(|m| m.id)
        .unwrap_or_default();
    assert!(bob_msg > 0 && alice_msg > 0);

    let alice_pts = alice.get_state().await?.pts;
    let bob_pts = bob.get_state().await?.pts;
    let mut bob_stream = bob_laptop.stream(bob_pts).await?;

    // Alice reacts to Bob's message.
    let reacted = alice
        .send_reaction(InputPeer::user(bob_id), alice_msg, "👍")
        .await?;
    assert_eq!(
        (reacted.pts, reacted.pts_count),
        (alice_pts + 1, 1),
        "Alice's answer carries her pts"
    );
    let pushed = next_update_where(&mut bob_stream, reactions_update).await?;
    assert_eq!(pushed.msg_id, bob_msg, "Bob's other device, in Bob's ids");
    assert_eq!(counts(&pushed.reactions), [("👍", 1, false)]);
    assert!(pushed.reaction_unread, "news to the author");
    assert_eq!(pushed.peer.and_then(|p| p.user_id()), Some(alice_id));

    // Both histories show it, each from its owner's side.
    let bobs_view = in_history(&bob, alice_id, bob_msg).await?;
    assert_eq!(counts(&bobs_view.reactions), [("👍", 1, false)]);
    assert!(bobs_view.reaction_unread);
    let alices_view = in_history(&alice, bob_id, alice_msg).await?;
    assert_eq!(counts(&alices_view.reactions), [("👍", 1, true)]);
    assert!(
        !alices_view.reaction_unread,
        "her own reaction is no news to her"
    );
    unread_reactions_become(&bob, alice_id, 1).await?;
    unread_reactions_become(&alice, bob_id, 0).await?;

    // A replacement keeps one reaction of Alice's, still unread once.
    alice
        .send_reaction(InputPeer::user(bob_id), alice_msg, "❤")
        .await?;
    let pushed = next_update_where(&mut bob_stream, reactions_update).await?;
    assert_eq!(counts(&pushed.reactions), [("❤", 1, false)]);
    // The same reaction again moves no pts.
    let again = alice
        .send_reaction(InputPeer::user(bob_id), alice_msg, "❤")
        .await?;
    assert_eq!(again.pts_count, 0);
    unread_reactions_become(&bob, alice_id, 1).await?;

    // Bob reads the dialog's reactions: 0, and his other device learns which.
    let read = bob.read_reactions(InputPeer::user(alice_id)).await?;
    assert_eq!(read.pts_count, 1);
    let pushed = next_update_where(&mut bob_stream, read_update).await?;
    assert_eq!(pushed.messages, [bob_msg]);
    unread_reactions_become(&bob, alice_id, 0).await?;
    assert!(!in_history(&bob, alice_id, bob_msg).await?.reaction_unread);
    // A repeat reads nothing.
    let again = bob.read_reactions(InputPeer::user(alice_id)).await?;
    assert_eq!((again.pts, again.pts_count), (read.pts, 0));

    // A new reaction is unread again; removed before Bob reads it, it is taken back.
    alice
        .send_reaction(InputPeer::user(bob_id), alice_msg, "🔥")
        .await?;
    unread_reactions_become(&bob, alice_id, 1).await?;
    alice
        .send_reaction(InputPeer::user(bob_id), alice_msg, "")
        .await?;
    let removed = loop {
        let u = next_update_where(&mut bob_stream, reactions_update).await?;
        if u.reactions.is_empty() {
            break u;
        }
    };
    assert!(!removed.reaction_unread);
    unread_reactions_become(&bob, alice_id, 0).await?;
    assert!(
        in_history(&bob, alice_id, bob_msg)
            .await?
            .reactions
            .is_empty()
    );

    // Bob's log holds each change once, in order, for getDifference: four reactions and his
    // read; Alice's the four reactions.
    let bob_log = reactions_in_log(&bob, bob_pts).await?;
    let kinds: Vec<&str> = bob_log
        .iter()
        .map(|(_, k)| match k {
            update::Kind::MessageReactions(u) if u.reactions.is_empty() => "removed",
            update::Kind::MessageReactions(u) => u.reactions[0].reaction.as_str(),
            _ => "read",
        })
        .collect();
    assert_eq!(kinds, ["👍", "❤", "read", "🔥", "removed"]);
    assert!(bob_log.iter().all(|(u, _)| u.pts_count == 1));
    let alice_log = reactions_in_log(&alice, alice_pts).await?;
    assert_eq!(alice_log.len(), 4, "Alice's log: her four changes");
    assert!(alice_log.iter().all(|(_, k)| matches!(
        k,
        update::Kind::MessageReactions(u) if u.msg_id == alice_msg
    )));

    // A deleted message's unread reaction stops counting.
    alice
        .send_reaction(InputPeer::user(bob_id), alice_msg, "🎉")
        .await?;
    unread_reactions_become(&bob, alice_id, 1).await?;
    bob.delete(&[bob_msg], false).await?;
    unread_reactions_become(&bob, alice_id, 0).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reactions_get_their_codes() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob, carol] = system
        .users([
            ("15558501", "Alice"),
            ("15558502", "Bob"),
            ("15558503", "Carol"),
        ])
        .await?;
    let (bob_id, carol_id) = (bob.user_id()?, carol.user_id()?);
    let sent = alice.send(bob_id, 1, "to Bob").await?;
    let id = sent.message.map(|m| m.id).unwrap_or_default();
    let long = "👍".repeat(17);
    // (peer, msg_id, reaction, the code)
    let table = [
        (InputPeer::user(bob_id), id, "ok", "REACTION_INVALID"),
        (
            InputPeer::user(bob_id),
            id,
            long.as_str(),
            "REACTION_INVALID",
        ),
        (InputPeer::user(bob_id), id, "👍 👍", "REACTION_INVALID"),
        (InputPeer::user(bob_id), id, "👍\0", "INPUT_TEXT_INVALID"),
        (InputPeer::user(bob_id), 0, "👍", "MESSAGE_ID_INVALID"),
        (InputPeer::user(bob_id), 999, "👍", "MESSAGE_ID_INVALID"),
        // A message of another dialog is not one of this dialog.
        (InputPeer::user(carol_id), id, "👍", "MESSAGE_ID_INVALID"),
        (InputPeer::user(987_654), id, "👍", "PEER_ID_INVALID"),
    ];
    for (i, (peer, msg_id, reaction, want)) in table.into_iter().enumerate() {
        let got = alice.send_reaction(peer, msg_id, reaction).await;
        assert_eq!(
            got.err().map(|e| e.code()).as_deref(),
            Some(want),
            "row {i}"
        );
    }
    // Carol cannot react to a message she does not hold (Alice's id of it names none of hers).
    let refused = carol.send_reaction(InputPeer::user(bob_id), id, "👍").await;
    assert_eq!(
        refused.err().map(|e| e.code()).as_deref(),
        Some("MESSAGE_ID_INVALID")
    );
    let refused = alice.read_reactions(InputPeer::user(987_654)).await;
    assert_eq!(
        refused.err().map(|e| e.code()).as_deref(),
        Some("PEER_ID_INVALID")
    );
    let anonymous = system.device().await?;
    let refused = anonymous
        .send_reaction(InputPeer::user(bob_id), id, "👍")
        .await;
    assert_eq!(
        refused.err().map(|e| e.code()).as_deref(),
        Some("AUTH_KEY_UNREGISTERED")
    );
    Ok(())
}

/// The emoji, count and whether chosen of Telegram's reactions of a message.
fn tl_counts(reactions: &oxigram_tl::enums::MessageReactions) -> Vec<(String, i32, bool)> {
    use oxigram_tl::enums;
    let enums::MessageReactions::Reactions(r) = reactions;
    r.results
        .iter()
        .map(|enums::ReactionCount::Count(c)| {
            let emoji = match &c.reaction {
                enums::Reaction::Emoji(e) => e.emoticon.clone(),
                other => format!("{other:?}"),
            };
            (emoji, c.count, c.chosen_order.is_some())
        })
        .collect()
}

/// The latest messages of a Telegram client's dialog with `peer`.
async fn tl_history(
    client: &mut oxigram_mtproto::client::Client,
    peer: &oxigram_tl::enums::InputPeer,
) -> anyhow::Result<Vec<oxigram_tl::enums::Message>> {
    use oxigram_tl::enums::messages::Messages;
    match client.invoke(&crate::mtproto::latest(peer.clone())).await? {
        Messages::Messages(m) => Ok(m.messages),
        Messages::Slice(m) => Ok(m.messages),
        other => anyhow::bail!("history: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_client_reacts_and_reads_reactions() -> anyhow::Result<()> {
    use oxigram_tests::mtproto::sign_up;
    use oxigram_tl::{enums, functions, types};

    let (system, key, port) = crate::mtproto::system_with_door().await?;
    let [alice] = system.users([("15558601", "Alice")]).await?;
    let mut bob = crate::mtproto::connect(&key, port).await?;
    let bob_user = sign_up(&mut bob, "15558602", "Bob").await?;
    let sent = alice.send(bob_user.id, 1, "react to me").await?;
    let alice_msg = sent.message.map(|m| m.id).unwrap_or_default();
    let mut alice_stream = alice.stream(alice.get_state().await?.pts).await?;
    let alice_peer = enums::InputPeer::User(types::InputPeerUser {
        user_id: alice.user_id()?,
        access_hash: 0,
    });
    let messages = tl_history(&mut bob, &alice_peer).await?;
    let [enums::Message::Message(note)] = messages.as_slice() else {
        anyhow::bail!("Bob's history: {messages:?}");
    };
    assert!(note.reactions.is_none(), "no reactions yet");

    let react = |emoji: Option<&str>| functions::messages::SendReaction {
        big: false,
        add_to_recent: false,
        peer: alice_peer.clone(),
        msg_id: note.id,
        reaction: emoji.map(|e| {
            vec![enums::Reaction::Emoji(types::ReactionEmoji {
                emoticon: e.into(),
            })]
        }),
    };
    let enums::Updates::Updates(answer) = bob.invoke(&react(Some("👍"))).await? else {
        anyhow::bail!("sendReaction answers updates");
    };
    let reactions: Vec<_> = answer
        .updates
        .iter()
        .filter_map(|u| match u {
            enums::Update::MessageReactions(r) => Some((r.msg_id, tl_counts(&r.reactions))),
            _ => None,
        })
        .collect();
    assert_eq!(reactions, [(note.id, vec![("👍".to_owned(), 1, true)])]);

    // The gRPC author learns it, unread.
    let pushed = next_update_where(&mut alice_stream, reactions_update).await?;
    assert_eq!(pushed.msg_id, alice_msg);
    assert_eq!(counts(&pushed.reactions), [("👍", 1, false)]);
    assert!(pushed.reaction_unread);
    unread_reactions_become(&alice, bob_user.id, 1).await?;

    // Bob's history on the door shows it, his own chosen.
    let messages = tl_history(&mut bob, &alice_peer).await?;
    let [enums::Message::Message(note)] = messages.as_slice() else {
        anyhow::bail!("Bob's history: {messages:?}");
    };
    let shown = note.reactions.as_ref().map(tl_counts);
    assert_eq!(shown, Some(vec![("👍".to_owned(), 1, true)]));

    // Alice (gRPC) reacts to her own message too: Bob's session is told live, and his
    // difference from before says it again, each beside the pts it moved.
    let enums::updates::State::State(before) = bob.invoke(&functions::updates::GetState {}).await?;
    alice
        .send_reaction(InputPeer::user(bob_user.id), alice_msg, "❤")
        .await?;
    let both = |mut counts: Vec<(String, i32, bool)>| {
        counts.sort();
        counts
    };
    let want = both(vec![("❤".to_owned(), 1, false), ("👍".to_owned(), 1, true)]);
    let live = loop {
        match crate::mtproto::next_updates(&mut bob).await? {
            enums::Updates::Updates(u) => match u.updates.as_slice() {
                [enums::Update::MessageReactions(r), moved] => break (r.clone(), moved.clone()),
                _ => continue,
            },
            _ => continue,
        }
    };
    assert_eq!(
        (live.0.msg_id, both(tl_counts(&live.0.reactions))),
        (note.id, want.clone())
    );
    assert!(
        matches!(&live.1, enums::Update::ReadMessagesContents(m)
            if m.messages.is_empty() && (m.pts, m.pts_count) == (before.pts + 1, 1)),
        "the pts Alice's reaction moved in Bob's log: {:?}",
        live.1
    );
    let difference = bob
        .invoke(&crate::mtproto::difference_from(before.pts))
        .await?;
    let enums::updates::Difference::Difference(difference) = difference else {
        anyhow::bail!("{difference:?}");
    };
    let caught: Vec<_> = difference
        .other_updates
        .iter()
        .filter_map(|u| match u {
            enums::Update::MessageReactions(r) => Some((r.msg_id, both(tl_counts(&r.reactions)))),
            _ => None,
        })
        .collect();
    assert_eq!(caught, [(note.id, want)]);

    // Removed (no reaction): the author's unread goes back.
    bob.invoke(&react(None)).await?;
    unread_reactions_become(&alice, bob_user.id, 0).await?;

    // Bob has no unread reactions: readReactions moves no pts.
    let read = functions::messages::ReadReactions {
        peer: alice_peer.clone(),
        top_msg_id: None,
        saved_peer_id: None,
    };
    let enums::messages::AffectedHistory::History(read) = bob.invoke(&read).await?;
    assert_eq!((read.pts_count, read.offset), (0, 0));
    Ok(())
}
