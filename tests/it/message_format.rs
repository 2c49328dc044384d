//! A message's formatting through the gateway: entities travel with the message to every
//! owner (answer, push, history, getDifference) and change with an edit; bad entities and
//! quotes have their stable codes and store nothing; a reply's quote must occur in the replied
//! text; and the sender's devices learn the random_id of their own message (echo
//! correlation), so a device whose answer was lost settles its pending send from the stream
//! or getDifference.

use anyhow::Context;
use oxigram_client::{PendingSends, Sequencer, State, echo};
use oxigram_proto::{
    api::v1::{EditMessageRequest, SendMessageRequest},
    types::v1::{Message, MessageEntity, PtsUpdate, ReplyQuote, message_entity::Kind, update},
};
use oxigram_tests::{
    Mode, System, TestClient,
    client::{code, in_history, next_update, next_update_where},
};
use tonic::Status;

fn entity(kind: Kind, offset: i32, length: i32) -> MessageEntity {
    MessageEntity {
        kind: kind as i32,
        offset,
        length,
        ..Default::default()
    }
}

fn link(offset: i32, length: i32, url: &str) -> MessageEntity {
    MessageEntity {
        url: url.into(),
        ..entity(Kind::TextUrl, offset, length)
    }
}

/// A send of `text` to `peer` under key `random_id`.
fn to(peer: i64, random_id: i64, text: &str) -> SendMessageRequest {
    SendMessageRequest {
        peer: Some(oxigram_proto::types::v1::InputPeer::user(peer)),
        random_id,
        text: text.into(),
        ..Default::default()
    }
}

/// Sends through the generated client, for the status of a refusal.
async fn send(device: &TestClient, request: SendMessageRequest) -> Result<Message, Status> {
    device
        .messages()
        .send_message(request)
        .await?
        .into_inner()
        .message
        .ok_or_else(|| Status::internal("no message in the answer"))
}

async fn pts_of(device: &TestClient) -> anyhow::Result<i32> {
    Ok(device.get_state().await?.pts)
}

/// The new messages of every slice of `device`'s difference after `pts`, in their current
/// state, and the updates.
async fn difference(
    device: &TestClient,
    pts: i32,
) -> anyhow::Result<(Vec<PtsUpdate>, Vec<Message>)> {
    let (slices, _) = device.full_difference(pts).await?;
    let (mut updates, mut messages) = (Vec::new(), Vec::new());
    for slice in slices {
        updates.extend(slice.updates);
        messages.extend(slice.new_messages);
    }
    Ok((updates, messages))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_reach_every_owner_and_change_with_an_edit() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice] = system.users([("15559001", "Alice")]).await?;
    let (bob_phone, bob_laptop, bob_id) = system.user_on_two_devices("15559002", "Bob").await?;
    let alice_id = alice.user_id()?;
    let mut bob_stream = bob_phone.stream(0).await?;

    // "😀 bold and a link": the emoji is two UTF-16 code units, so "bold" starts at 3.
    let text = "😀 bold and a link";
    let entities = vec![
        entity(Kind::Bold, 3, 4),
        entity(Kind::Italic, 3, 2),
        link(14, 4, "https://example.com/page"),
    ];
    let sent = send(
        &alice,
        SendMessageRequest {
            entities: entities.clone(),
            ..to(bob_id, 1, text)
        },
    )
    .await?;
    assert_eq!(sent.entities, entities, "the answer");

    let pushed = next_update_where(&mut bob_stream, |k| match k {
        update::Kind::NewMessage(n) => n.message,
        _ => None,
    })
    .await?;
    assert_eq!(
        (pushed.text.as_str(), &pushed.entities),
        (text, &entities),
        "the push"
    );
    let bob_box = pushed.id;
    for (device, peer, id) in [(&alice, bob_id, sent.id), (&bob_laptop, alice_id, bob_box)] {
        assert_eq!(
            in_history(device, peer, id).await?.entities,
            entities,
            "history"
        );
    }
    let (_, current) = difference(&bob_laptop, 0).await?;
    assert_eq!(
        current.iter().map(|m| &m.entities).collect::<Vec<_>>(),
        [&entities],
        "getDifference"
    );

    // An edit of the entities alone: a new fact for both owners.
    let edited_entities = vec![
        entity(Kind::Code, 3, 4),
        link(14, 4, "tg://resolve?domain=x"),
    ];
    let edit = |entities: Vec<MessageEntity>| EditMessageRequest {
        peer: Some(oxigram_proto::types::v1::InputPeer::user(bob_id)),
        id: sent.id,
        text: text.into(),
        entities,
        ..Default::default()
    };
    let edited = alice
        .messages()
        .edit_message(edit(edited_entities.clone()))
        .await?
        .into_inner();
    let mine = edited.message.context("no message")?;
    assert_eq!(mine.entities, edited_entities);
    let pushed = next_update_where(&mut bob_stream, |k| match k {
        update::Kind::EditMessage(e) => e.message,
        _ => None,
    })
    .await?;
    assert_eq!((pushed.id, &pushed.entities), (bob_box, &edited_entities));
    for (device, peer, id) in [(&alice, bob_id, sent.id), (&bob_laptop, alice_id, bob_box)] {
        assert_eq!(
            in_history(device, peer, id).await?.entities,
            edited_entities
        );
    }
    // getDifference gives the new message in its current state, and the edit as logged.
    let (updates, current) = difference(&bob_laptop, 0).await?;
    assert_eq!(
        current.iter().map(|m| &m.entities).collect::<Vec<_>>(),
        [&edited_entities]
    );
    let logged_edit = updates
        .iter()
        .find_map(|u| match u.update.as_ref()?.kind.as_ref()? {
            update::Kind::EditMessage(e) => e.message.clone(),
            _ => None,
        });
    assert_eq!(
        logged_edit.map(|m| m.entities),
        Some(edited_entities.clone())
    );

    // The same text and entities, in another order: nothing to modify, nothing logged.
    let alice_pts = pts_of(&alice).await?;
    let reordered: Vec<MessageEntity> = edited_entities.iter().rev().cloned().collect();
    let again = alice.messages().edit_message(edit(reordered)).await;
    assert_eq!(
        again.err().and_then(|s| code(&s)).as_deref(),
        Some("MESSAGE_NOT_MODIFIED")
    );
    assert_eq!(pts_of(&alice).await?, alice_pts);
    // Dropping the entities is a change.
    let plain = alice
        .messages()
        .edit_message(edit(vec![]))
        .await?
        .into_inner();
    assert!(plain.message.context("no message")?.entities.is_empty());
    assert!(
        in_history(&bob_laptop, alice_id, bob_box)
            .await?
            .entities
            .is_empty()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_entities_have_their_codes_and_store_nothing() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15559101", "Alice"), ("15559102", "Bob")])
        .await?;
    let bob_id = bob.user_id()?;
    let text = "hello 😀 world";
    let mention = |user_id| MessageEntity {
        user_id,
        ..entity(Kind::MentionName, 0, 5)
    };
    let pre = |language: &str| MessageEntity {
        language: language.into(),
        ..entity(Kind::Pre, 0, 5)
    };
    let table: Vec<(Vec<MessageEntity>, &str)> = vec![
        (vec![entity(Kind::Bold, 0, 15)], "ENTITY_BOUNDS_INVALID"),
        (vec![entity(Kind::Bold, 7, 1)], "ENTITY_BOUNDS_INVALID"),
        (vec![entity(Kind::Bold, -1, 3)], "ENTITY_BOUNDS_INVALID"),
        (vec![entity(Kind::Bold, 2, 0)], "ENTITY_BOUNDS_INVALID"),
        (
            (0..101).map(|_| entity(Kind::Bold, 0, 1)).collect(),
            "ENTITIES_TOO_LONG",
        ),
        (vec![entity(Kind::Unspecified, 0, 1)], "ENTITY_KIND_INVALID"),
        (
            vec![MessageEntity {
                url: "https://example.com".into(),
                ..entity(Kind::Bold, 0, 5)
            }],
            "ENTITY_KIND_INVALID",
        ),
        (
            vec![entity(Kind::Bold, 0, 5), entity(Kind::Italic, 3, 6)],
            "ENTITY_NESTING_INVALID",
        ),
        (
            vec![entity(Kind::Code, 0, 14), entity(Kind::Bold, 0, 5)],
            "ENTITY_NESTING_INVALID",
        ),
        (
            vec![link(0, 5, "javascript:alert(1)")],
            "ENTITY_URL_INVALID",
        ),
        (vec![link(0, 5, "example.com")], "ENTITY_URL_INVALID"),
        (vec![mention(0)], "ENTITY_MENTION_USER_INVALID"),
        (vec![pre("not a language")], "ENTITY_LANGUAGE_INVALID"),
    ];
    let alice_pts = pts_of(&alice).await?;
    for (i, (entities, expected)) in table.iter().enumerate() {
        let got = send(
            &alice,
            SendMessageRequest {
                entities: entities.clone(),
                ..to(bob_id, 100 + i as i64, text)
            },
        )
        .await;
        assert_eq!(
            got.err().and_then(|s| code(&s)).as_deref(),
            Some(*expected),
            "send, row {i}"
        );
    }
    assert_eq!(pts_of(&alice).await?, alice_pts, "no send was logged");
    assert!(
        alice.history(bob_id).await?.is_empty(),
        "nothing was stored"
    );

    // An edit follows the same rules, and changes nothing when refused.
    let sent = alice.send(bob_id, 1, text).await?;
    let id = sent.message.context("no message")?.id;
    let alice_pts = pts_of(&alice).await?;
    for (i, (entities, expected)) in table.into_iter().enumerate() {
        let got = alice
            .messages()
            .edit_message(EditMessageRequest {
                peer: Some(oxigram_proto::types::v1::InputPeer::user(bob_id)),
                id,
                text: text.into(),
                entities,
                ..Default::default()
            })
            .await;
        assert_eq!(
            got.err().and_then(|s| code(&s)).as_deref(),
            Some(expected),
            "edit, row {i}"
        );
    }
    assert_eq!(pts_of(&alice).await?, alice_pts, "no edit was logged");
    let m = in_history(&alice, bob_id, id).await?;
    assert_eq!((m.entities.len(), m.edit_date), (0, 0));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_quote_must_occur_in_the_replied_text() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15559201", "Alice"), ("15559202", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    // Bob's box ids run ahead of Alice's: the quote names the replied message in each
    // owner's own ids.
    bob.send(bob_id, 50, "a note to self").await?;
    let original = alice
        .send(bob_id, 1, "the quick 😀 brown fox, the brown dog")
        .await?
        .message
        .context("no message")?;
    let bob_box = original.id + 1;
    let quoting = |random_id: i64, quote: &str, offset: Option<i32>| SendMessageRequest {
        reply_to_msg_id: bob_box,
        quote_text: quote.into(),
        quote_entities: vec![entity(Kind::Italic, 0, quote.encode_utf16().count() as i32)],
        quote_offset: offset,
        ..to(alice_id, random_id, "a reply")
    };

    // Found anywhere: its first occurrence, in UTF-16 code units (the emoji counts two).
    let first = send(&bob, quoting(1, "brown", None)).await?;
    // Found where it is said to be.
    let second = send(&bob, quoting(2, "brown", Some(28))).await?;
    let quote = |offset| ReplyQuote {
        text: "brown".into(),
        entities: vec![entity(Kind::Italic, 0, 5)],
        offset,
    };
    assert_eq!(
        [&first, &second].map(|m| (m.reply_to_msg_id, m.reply_quote.clone())),
        [(bob_box, Some(quote(13))), (bob_box, Some(quote(28)))]
    );
    // Alice sees both quotes, as replies to her own id.
    for (m, offset) in [(&first, 13), (&second, 28)] {
        let hers = in_history(&alice, bob_id, m.id - 1).await?;
        assert_eq!(
            (hers.reply_to_msg_id, hers.reply_quote),
            (original.id, Some(quote(offset)))
        );
    }

    let bob_pts = pts_of(&bob).await?;
    let too_long = "x".repeat(1025);
    let table: Vec<(SendMessageRequest, &str)> = vec![
        (quoting(3, "grey cat", None), "QUOTE_TEXT_INVALID"),
        (quoting(3, "Brown", None), "QUOTE_TEXT_INVALID"),
        (quoting(3, "brown", Some(12)), "QUOTE_TEXT_INVALID"),
        (quoting(3, "brown", Some(1000)), "QUOTE_TEXT_INVALID"),
        (quoting(3, &too_long, None), "QUOTE_TEXT_TOO_LONG"),
        (
            SendMessageRequest {
                reply_to_msg_id: 0,
                ..quoting(3, "brown", None)
            },
            "QUOTE_TEXT_INVALID",
        ),
        (
            SendMessageRequest {
                quote_entities: vec![entity(Kind::Bold, 0, 6)],
                ..quoting(3, "brown", None)
            },
            "ENTITY_BOUNDS_INVALID",
        ),
        (
            SendMessageRequest {
                reply_to_msg_id: 99,
                ..quoting(3, "brown", None)
            },
            "REPLY_MESSAGE_ID_INVALID",
        ),
    ];
    for (request, expected) in table {
        let what = format!("{:?} at {:?}", request.quote_text, request.quote_offset);
        let got = send(&bob, request).await;
        assert_eq!(
            got.err().and_then(|s| code(&s)).as_deref(),
            Some(expected),
            "{what}"
        );
    }
    assert_eq!(pts_of(&bob).await?, bob_pts, "nothing was logged");
    // The refusals left key 3 free: the same key with a quote that is there is a message.
    let fixed = send(&bob, quoting(3, "the brown dog", None)).await?;
    assert_eq!(fixed.reply_quote.map(|q| q.offset), Some(24));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_senders_devices_match_their_send_by_its_random_id() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let (alice_phone, alice_laptop, alice_id) =
        system.user_on_two_devices("15559301", "Alice").await?;
    let [bob] = system.users([("15559302", "Bob")]).await?;
    let bob_id = bob.user_id()?;
    let mut laptop_stream = alice_laptop.stream(0).await?;
    let mut bob_stream = bob.stream(0).await?;

    // The phone keeps a pending bubble and sends; the answer is lost to it (kept here only
    // to compare).
    let random_id = 0x5eed_0001;
    let mut pending = PendingSends::new();
    pending.add(random_id, "bubble");
    let lost = alice_phone
        .send_message(to(bob_id, random_id, "did this arrive?"))
        .await?;
    let lost_id = lost.message.as_ref().context("no message")?.id;
    assert_eq!(lost.random_id, random_id, "the answer echoes the key");

    // Alice's other device: the key comes with the message on the stream.
    let pushed = next_update_where(&mut laptop_stream, |k| match k {
        update::Kind::NewMessage(n) => Some(n),
        _ => None,
    })
    .await?;
    assert_eq!(
        (pushed.random_id, pushed.message.map(|m| m.id)),
        (random_id, Some(lost_id))
    );
    // The recipient never sees it.
    let bobs = next_update(&mut bob_stream).await?;
    let Some(update::Kind::NewMessage(bobs)) = bobs.update.and_then(|u| u.kind) else {
        anyhow::bail!("Bob's update is not a new message");
    };
    assert_eq!((bobs.random_id, bobs.message.is_some()), (0, true));

    // The phone catches up from its saved state: getDifference settles the bubble, once.
    let mut seq = Sequencer::new(State::default());
    let mut settled = Vec::new();
    alice_phone
        .catch_up(&mut seq, |u, _| {
            if let Some((bubble, m)) = pending.settle(&u) {
                settled.push((bubble, m.id, m.text));
            }
        })
        .await?;
    assert_eq!(
        settled,
        [("bubble", lost_id, "did this arrive?".to_owned())]
    );
    assert!(pending.is_empty());
    // Bob's log holds no key either.
    let (bob_log, _) = difference(&bob, 0).await?;
    assert_eq!(
        bob_log
            .iter()
            .filter_map(|u| echo(u).map(|(r, _)| r))
            .collect::<Vec<_>>(),
        Vec::<i64>::new()
    );
    assert_eq!(bob_log.len(), 1);

    // A resend with the key (the phone retrying the lost call) is the same message and
    // logs nothing new; its answer settles nothing left.
    let before = pts_of(&alice_phone).await?;
    let retried = alice_phone
        .send_message(to(bob_id, random_id, "did this arrive?"))
        .await?;
    assert_eq!(
        (retried.message.as_ref().map(|m| m.id), retried.random_id),
        (Some(lost_id), random_id)
    );
    assert!(pending.answered(&retried).is_none());
    assert_eq!(pts_of(&alice_phone).await?, before);
    // Saved Messages: the one owner is the sender, and her log has the key.
    let note = alice_phone.send_message(to(alice_id, 77, "note")).await?;
    let (log, _) = difference(&alice_laptop, before).await?;
    assert_eq!(
        log.iter()
            .filter_map(|u| echo(u).map(|(r, m)| (r, m.id)))
            .collect::<Vec<_>>(),
        [(77, note.message.context("no message")?.id)]
    );
    Ok(())
}
