//! svc-messages' store against its own migrated schema: the send transaction (box ids, views,
//! events and outbox rows, replays, replies, blocks, forwards), the edit and delete
//! transactions, playing notes (read contents), reactions and their reads, and the owner-view
//! reads, search included.

use anyhow::Context;
use oxigram_outbox::{Outbox, RelayConfig};
use oxigram_proto::types::v1::{
    EditMessageRequest, ForwardMessagesRequest, InputPeer, Message, MessageEntity, MessageMedia,
    ReactionCount, ReplyQuote, SendMessageRequest, UserEvent, message_entity, message_media,
    update,
};
use oxigram_testkit::store::{Migrated, migrated};
use svc_messages::{
    delete::{self, Delete, DeleteOutcome, Deleted, MAX_DELETE_BATCH, Targets},
    edit::{self, Edit, EditOutcome},
    forward::Forward,
    reactions::{self, React, ReactOutcome, ReadReactions},
    read_contents::{self, ContentsRead, ReadContents},
    search_index,
    search_words::QueryWords,
    send::{self, NewMessage, SendOutcome, Sent},
    store::{self, HistoryWindow, SearchQuery},
};

const ANN: i64 = 1;
const BOB: i64 = 2;
const CAROL: i64 = 3;

async fn schema() -> anyhow::Result<(Migrated, Outbox)> {
    let db = migrated(
        svc_messages::SCHEMA,
        &[&svc_messages::MIGRATOR, &oxigram_outbox::MIGRATOR],
    )
    .await?;
    let outbox = Outbox::new(
        db.pool.clone(),
        svc_messages::SCHEMA,
        RelayConfig::default(),
    );
    Ok((db, outbox))
}

/// A send; what makes two sends the same request is the service's business, so here the
/// request hash is simply everything but the key.
fn new(sender_id: i64, peer_user_id: i64, random_id: i64, text: &str) -> NewMessage {
    replying(sender_id, peer_user_id, random_id, text, 0)
}

fn replying(sender: i64, peer: i64, random_id: i64, text: &str, reply_to: i64) -> NewMessage {
    NewMessage {
        sender_id: sender,
        peer_id: peer,
        auth_key_id: 7,
        request: SendMessageRequest {
            peer: Some(InputPeer::user(peer)),
            random_id,
            text: text.into(),
            reply_to_msg_id: reply_to,
            ..Default::default()
        },
        request_hash: format!("{peer}/{reply_to}/{text}").into_bytes(),
        fwd_from: None,
        traceparent: None,
    }
}

fn sent(outcome: &SendOutcome) -> anyhow::Result<&Sent> {
    match outcome {
        SendOutcome::Sent(sent) => Ok(sent),
        _ => anyhow::bail!("not sent: {}", kind(outcome)),
    }
}

fn kind(outcome: &SendOutcome) -> &'static str {
    match outcome {
        SendOutcome::Sent(_) => "sent",
        SendOutcome::Replayed { .. } => "replayed",
        SendOutcome::KeyReused => "key reused",
        SendOutcome::ReplyInvalid => "reply invalid",
        SendOutcome::QuoteInvalid => "quote invalid",
    }
}

async fn send_one(
    db: &Migrated,
    outbox: &Outbox,
    message: NewMessage,
) -> anyhow::Result<SendOutcome> {
    send::send(&db.pool, outbox, &[message])
        .await?
        .pop()
        .context("no outcome")
}

async fn by_ids(db: &Migrated, owner: i64, ids: &[i64]) -> anyhow::Result<Vec<Message>> {
    Ok(store::by_ids(&db.pool, owner, ids).await?)
}

#[tokio::test]
async fn a_batch_gives_each_owner_her_own_box_ids_views_and_events() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let outcomes = send::send(
        &db.pool,
        &outbox,
        &[
            new(ANN, BOB, 1, "hello bob"),
            new(BOB, ANN, 1, "hello ann"),
            new(ANN, ANN, 2, "a note to self"),
            new(ANN, BOB, 3, "again"),
        ],
    )
    .await?;
    let all = outcomes
        .iter()
        .map(sent)
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Box ids per owner, in the batch's order.
    let ids: Vec<i64> = all.iter().map(|s| s.message.id).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    let bob_sees: Vec<(i64, bool, i64)> = by_ids(&db, BOB, &[1, 2, 3])
        .await?
        .iter()
        .map(|m| (m.id, m.out, m.peer_user()))
        .collect();
    assert_eq!(bob_sees, [(1, false, ANN), (2, true, ANN), (3, false, ANN)]);

    // One event per owner, each naming the other owner's box; the saved message has one.
    let events: Vec<Vec<(i64, i64, i64)>> = all
        .iter()
        .map(|s| {
            s.updates_events
                .iter()
                .map(|e| (e.user_id, e.peer_box_id, e.origin_auth_key_id))
                .collect()
        })
        .collect();
    assert_eq!(
        events,
        [
            vec![(ANN, 1, 7), (BOB, 1, 7)],
            vec![(ANN, 2, 7), (BOB, 2, 7)],
            vec![(ANN, 0, 7)],
            vec![(ANN, 3, 7), (BOB, 4, 7)],
        ]
    );
    let note = &all[2].message;
    assert_eq!(
        (note.out, note.peer_user(), note.from_user_id),
        (true, ANN, ANN)
    );

    // Every event has its outbox row, written with the messages.
    let rows: Vec<i64> = all.iter().flat_map(|s| s.updates_rows.clone()).collect();
    assert_eq!(rows.len(), 7);
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox WHERE id = ANY($1) AND destination = 'updates'",
    )
    .bind(&rows)
    .fetch_one(&db.pool)
    .await?;
    let distinct: std::collections::HashSet<_> = rows.iter().collect();
    assert_eq!(stored, distinct.len() as i64);

    // A send alone (a batch of one) continues the same sequences.
    let next = send_one(&db, &outbox, new(BOB, ANN, 9, "and you")).await?;
    assert_eq!(sent(&next)?.message.id, 4);
    assert_eq!(by_ids(&db, ANN, &[5]).await?.len(), 1);
    Ok(())
}

#[tokio::test]
async fn a_used_key_replays_its_message_or_is_refused() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let first = send_one(&db, &outbox, new(ANN, BOB, 10, "hi")).await?;
    let first = sent(&first)?;
    let original_event = first
        .updates_events
        .iter()
        .find(|e| e.user_id == ANN)
        .context("the sender's event")?;

    // (a send with key 10, what it becomes)
    let cases = [
        (new(ANN, BOB, 10, "hi"), "replayed"),
        (new(ANN, BOB, 10, "hi, changed"), "key reused"),
        (new(ANN, CAROL, 10, "hi"), "key reused"),
        (replying(ANN, BOB, 10, "hi", 1), "key reused"),
        // Another sender's key 10 is hers.
        (new(BOB, ANN, 10, "hi"), "sent"),
    ];
    for (message, expected) in cases {
        let outcome = send_one(&db, &outbox, message).await?;
        assert_eq!(kind(&outcome), expected);
        if let SendOutcome::Replayed { message, event } = outcome {
            assert_eq!(message, first.message);
            assert_eq!(event.event_id, original_event.event_id);
            assert_eq!(event.peer_box_id, original_event.peer_box_id);
        }
    }

    // Within one batch: the first of a key is sent, the repeats see it as any later send.
    let outcomes = send::send(
        &db.pool,
        &outbox,
        &[
            new(ANN, BOB, 20, "twice"),
            new(ANN, BOB, 20, "twice"),
            new(ANN, BOB, 20, "not the same"),
            new(ANN, BOB, 21, "other"),
        ],
    )
    .await?;
    let kinds: Vec<&str> = outcomes.iter().map(kind).collect();
    assert_eq!(kinds, ["sent", "replayed", "key reused", "sent"]);
    if let [
        SendOutcome::Sent(first),
        SendOutcome::Replayed { message, .. },
        ..,
    ] = &outcomes[..]
    {
        assert_eq!(message, &first.message);
    }
    // Ann's boxes: 10 once, 20 once, 21, and Bob's message under his key 10.
    let ann: Vec<i64> = by_ids(&db, ANN, &[1, 2, 3, 4, 5])
        .await?
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ann, [1, 2, 3, 4]);
    Ok(())
}

#[tokio::test]
async fn replies_name_each_owners_box_of_the_message() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    // Ann's boxes: 1 (a note), 2 (to Bob); Bob's: 1.
    send_one(&db, &outbox, new(ANN, ANN, 1, "note")).await?;
    let question = send_one(&db, &outbox, new(ANN, BOB, 2, "question?")).await?;
    assert_eq!(sent(&question)?.message.id, 2);

    let answer = send_one(&db, &outbox, replying(BOB, ANN, 1, "answer", 1)).await?;
    let answer = sent(&answer)?;
    assert_eq!((answer.message.id, answer.message.reply_to_msg_id), (2, 1));
    let in_anns_box = by_ids(&db, ANN, &[3]).await?;
    assert_eq!(
        in_anns_box
            .iter()
            .map(|m| (m.reply_to_msg_id, m.out))
            .collect::<Vec<_>>(),
        [(2, false)]
    );
    let recipient_event = answer
        .updates_events
        .iter()
        .find(|e| e.user_id == ANN)
        .context("Ann's event")?;
    let Some(oxigram_proto::types::v1::update::Kind::NewMessage(new_message)) = recipient_event
        .update
        .as_ref()
        .and_then(|u| u.kind.as_ref())
    else {
        anyhow::bail!("not a new message");
    };
    assert_eq!(
        new_message.message.as_ref().map(|m| m.reply_to_msg_id),
        Some(2)
    );
    Ok(())
}

#[tokio::test]
async fn an_invalid_reply_takes_no_box_id_and_leaves_its_key_free() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    send_one(&db, &outbox, new(ANN, ANN, 1, "note")).await?; // Ann 1
    send_one(&db, &outbox, new(ANN, BOB, 2, "to bob")).await?; // Ann 2, Bob 1
    send_one(&db, &outbox, new(BOB, CAROL, 1, "to carol")).await?; // Bob 2, Carol 1

    // (reply_to of a send from Ann to Bob, what it becomes)
    let cases = [
        (99, "reply invalid"), // no such box
        (1, "reply invalid"),  // her note: not of this dialog
        (3, "reply invalid"),  // past her last box
        (2, "sent"),
    ];
    // Every case uses the same key: a refused reply leaves it free.
    for (reply_to, expected) in cases {
        let outcomes = send::send(
            &db.pool,
            &outbox,
            &[
                replying(ANN, BOB, 50, "re", reply_to),
                new(CAROL, BOB, reply_to, "beside it"),
            ],
        )
        .await?;
        assert_eq!(
            outcomes.iter().map(kind).collect::<Vec<_>>(),
            [expected, "sent"],
            "reply to {reply_to}"
        );
    }
    // No gap in Ann's box ids; Bob got one box per accepted send.
    let ann: Vec<i64> = by_ids(&db, ANN, &[1, 2, 3, 4])
        .await?
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ann, [1, 2, 3]);
    let bob: Vec<i64> = by_ids(&db, BOB, &(1..=8).collect::<Vec<_>>())
        .await?
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(bob, [1, 2, 3, 4, 5, 6, 7]);
    Ok(())
}

#[tokio::test]
async fn a_blocked_sender_keeps_her_own_box_only() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    store::set_blocked(&db.pool, BOB, ANN, true).await?;
    // Idempotent.
    store::set_blocked(&db.pool, BOB, ANN, true).await?;

    let outcomes = send::send(
        &db.pool,
        &outbox,
        &[new(ANN, BOB, 1, "hello?"), new(CAROL, BOB, 1, "hi bob")],
    )
    .await?;
    let to_blocker = sent(&outcomes[0])?;
    assert_eq!(to_blocker.message.id, 1);
    assert_eq!(
        to_blocker
            .updates_events
            .iter()
            .map(|e| e.user_id)
            .collect::<Vec<_>>(),
        [ANN]
    );
    // Bob's only box is Carol's message: Ann's took no box id of his.
    let bob = by_ids(&db, BOB, &[1, 2]).await?;
    assert_eq!(
        bob.iter()
            .map(|m| (m.id, m.peer_user()))
            .collect::<Vec<_>>(),
        [(1, CAROL)]
    );

    store::set_blocked(&db.pool, BOB, ANN, false).await?;
    let after = send_one(&db, &outbox, new(ANN, BOB, 2, "now?")).await?;
    assert_eq!(sent(&after)?.updates_events.len(), 2);
    assert_eq!(by_ids(&db, BOB, &[2]).await?.len(), 1);
    Ok(())
}

/// `owner`'s forward of her messages `ids` in the dialog with `from` to `to`, keys from
/// `first_key` up, as the service makes it: its sources read by id, then one send each, in one
/// batch.
async fn forward(
    db: &Migrated,
    outbox: &Outbox,
    owner: i64,
    (from, ids, to): (i64, &[i64], InputPeer),
    first_key: i64,
    drop_author: bool,
) -> anyhow::Result<Result<Vec<SendOutcome>, String>> {
    let request = ForwardMessagesRequest {
        from_peer: Some(InputPeer::user(from)),
        random_ids: (first_key..).take(ids.len()).collect(),
        ids: ids.to_vec(),
        to_peer: Some(to),
        drop_author,
        ..Default::default()
    };
    let refused = |s: tonic::Status| oxigram_errors::code_of(&s).unwrap_or_default();
    let f = match Forward::check(owner, 7, request, None) {
        Ok(f) => f,
        Err(s) => return Ok(Err(refused(s))),
    };
    let sources = store::by_ids(&db.pool, owner, &f.request.ids).await?;
    let sends = match f.sends(&sources) {
        Ok(sends) => sends,
        Err(s) => return Ok(Err(refused(s))),
    };
    Ok(Ok(send::send(&db.pool, outbox, &sends).await?))
}

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

#[tokio::test]
async fn a_forward_is_a_send_with_its_header_in_every_owners_view() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let original = send_one(&db, &outbox, new(ANN, BOB, 1, "pass it on")).await?;
    let original = sent(&original)?.message.clone();
    send_one(&db, &outbox, new(BOB, ANN, 1, "will do")).await?; // Bob 2

    // Bob forwards Ann's message (his box 1) and his answer to Carol.
    let outcomes = forward(
        &db,
        &outbox,
        BOB,
        (ANN, &[2, 1], InputPeer::user(CAROL)),
        10,
        false,
    )
    .await?
    .map_err(anyhow::Error::msg)?;
    let all = outcomes
        .iter()
        .map(sent)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let first = (ANN, original.date, 1, 0, 0);
    let answer_date = by_ids(&db, BOB, &[2]).await?[0].date;
    let own = (BOB, answer_date, 2, 0, 0);
    let bob_sees: Vec<_> = all
        .iter()
        .map(|s| (s.message.id, s.message.text.as_str(), header(&s.message)))
        .collect();
    assert_eq!(
        bob_sees,
        [(3, "will do", Some(own)), (4, "pass it on", Some(first))]
    );
    // Carol's view, by id and in her events, has the same headers; so do Bob's boxes.
    let carol = by_ids(&db, CAROL, &[1, 2]).await?;
    assert_eq!(
        carol
            .iter()
            .map(|m| (m.from_user_id, m.peer_user(), m.out, header(m)))
            .collect::<Vec<_>>(),
        [(BOB, BOB, false, Some(own)), (BOB, BOB, false, Some(first))]
    );
    let in_events: Vec<_> = all
        .iter()
        .flat_map(|s| &s.updates_events)
        .filter_map(|e| match e.update.as_ref().and_then(|u| u.kind.as_ref()) {
            Some(update::Kind::NewMessage(n)) => n.message.as_ref().map(|m| (e.user_id, header(m))),
            _ => None,
        })
        .collect();
    assert_eq!(
        in_events,
        [
            (BOB, Some(own)),
            (CAROL, Some(own)),
            (BOB, Some(first)),
            (CAROL, Some(first))
        ]
    );
    let bob = by_ids(&db, BOB, &[3, 4]).await?;
    assert_eq!(
        bob.iter().map(header).collect::<Vec<_>>(),
        [Some(own), Some(first)]
    );

    // Carol saves the forward of Ann's message: Ann stays the author; it was saved from Bob's
    // dialog, her box 2.
    let saved = forward(&db, &outbox, CAROL, (BOB, &[2], InputPeer::me()), 1, false)
        .await?
        .map_err(anyhow::Error::msg)?;
    let saved = &sent(&saved[0])?.message;
    assert_eq!(
        (saved.peer_user(), header(saved)),
        (CAROL, Some((ANN, original.date, 1, BOB, 2)))
    );
    assert_eq!(
        header(&by_ids(&db, CAROL, &[saved.id]).await?[0]),
        header(saved)
    );
    // Without the author: Carol's own message, no header; search finds it as any message.
    let dropped = forward(
        &db,
        &outbox,
        CAROL,
        (BOB, &[2], InputPeer::user(ANN)),
        2,
        true,
    )
    .await?
    .map_err(anyhow::Error::msg)?;
    let dropped = &sent(&dropped[0])?.message;
    assert_eq!(
        (dropped.from_user_id, dropped.text.as_str(), header(dropped)),
        (CAROL, "pass it on", None)
    );
    let found = store::search(
        &db.pool,
        &SearchQuery {
            owner: CAROL,
            ..search_of("pass it")
        },
    )
    .await?
    .messages;
    assert_eq!(
        found.iter().map(header).collect::<Vec<_>>(),
        [None, Some((ANN, original.date, 1, BOB, 2)), Some(first)]
    );
    Ok(())
}

#[tokio::test]
async fn forwards_replay_by_key_and_refuse_bad_sources_whole() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    send_one(&db, &outbox, new(ANN, BOB, 1, "free")).await?; // Ann 1, Bob 1
    let mut protected = new(ANN, BOB, 2, "protected");
    protected.request.noforwards = true;
    send_one(&db, &outbox, protected).await?; // Ann 2, Bob 2
    send_one(&db, &outbox, new(ANN, CAROL, 3, "to carol")).await?; // Ann 3
    let first = forward(
        &db,
        &outbox,
        BOB,
        (ANN, &[1], InputPeer::user(CAROL)),
        10,
        false,
    )
    .await?
    .map_err(anyhow::Error::msg)?;
    let first = sent(&first[0])?.message.clone();

    // (Bob's forward: from, ids, first key, what it becomes)
    let kinds = |r: Result<Vec<SendOutcome>, String>| match r {
        Ok(outcomes) => outcomes.iter().map(kind).collect::<Vec<_>>().join(","),
        Err(code) => code,
    };
    let cases: [(i64, &[i64], i64, &str); 7] = [
        // The same forward again: the original message.
        (ANN, &[1], 10, "replayed"),
        // Refused by its sources before any key is looked at.
        (ANN, &[2], 10, "CHAT_FORWARDS_RESTRICTED"),
        (CAROL, &[1], 10, "MESSAGE_ID_INVALID"),
        (ANN, &[1, 99], 20, "MESSAGE_ID_INVALID"),
        (ANN, &[1, 2], 20, "CHAT_FORWARDS_RESTRICTED"),
        (ANN, &[], 20, "MESSAGE_IDS_EMPTY"),
        (ANN, &[1, 1], 10, "replayed,sent"),
    ];
    for (from, ids, key, expected) in cases {
        let got = forward(
            &db,
            &outbox,
            BOB,
            (from, ids, InputPeer::user(CAROL)),
            key,
            false,
        )
        .await?;
        if let Ok(outcomes) = &got
            && let Some(SendOutcome::Replayed { message, .. }) = outcomes.first()
        {
            assert_eq!(message, &first);
        }
        assert_eq!(kinds(got), expected, "{from} {ids:?} {key}");
    }
    // Asked before a forward is sent: a key used for something else (10), beside a new one.
    let sources = by_ids(&db, BOB, &[1]).await?;
    for (to, drop_author, reused) in [
        (CAROL, false, false),
        (CAROL, true, true),
        (ANN, false, true),
    ] {
        let request = ForwardMessagesRequest {
            from_peer: Some(InputPeer::user(ANN)),
            ids: vec![1, 1],
            random_ids: vec![10, 12],
            to_peer: Some(InputPeer::user(to)),
            drop_author,
            ..Default::default()
        };
        let sends = Forward::check(BOB, 7, request, None)?.sends(&sources)?;
        assert_eq!(send::any_key_reused(&db.pool, &sends).await?, reused);
    }
    // A key used by a forward is refused for a different forward, as for a send.
    let reused = forward(
        &db,
        &outbox,
        BOB,
        (ANN, &[1], InputPeer::user(ANN)),
        10,
        false,
    )
    .await?;
    assert_eq!(kinds(reused), "key reused");
    let reused = forward(
        &db,
        &outbox,
        BOB,
        (ANN, &[1], InputPeer::user(CAROL)),
        10,
        true,
    )
    .await?;
    assert_eq!(kinds(reused), "key reused");
    // Nothing refused took a box: Carol has the two forwards of Bob's accepted calls.
    assert_eq!(
        by_ids(&db, CAROL, &(1..=5).collect::<Vec<_>>())
            .await?
            .iter()
            .map(|m| (m.id, m.peer_user()))
            .collect::<Vec<_>>(),
        [(1, ANN), (2, BOB), (3, BOB)]
    );

    // A forward to a user who blocked the forwarder is a send to her: his box only.
    store::set_blocked(&db.pool, CAROL, BOB, true).await?;
    let blocked = forward(
        &db,
        &outbox,
        BOB,
        (ANN, &[1], InputPeer::user(CAROL)),
        30,
        false,
    )
    .await?
    .map_err(anyhow::Error::msg)?;
    let blocked = sent(&blocked[0])?;
    assert_eq!(
        blocked
            .updates_events
            .iter()
            .map(|e| e.user_id)
            .collect::<Vec<_>>(),
        [BOB]
    );
    assert_eq!(by_ids(&db, CAROL, &[4]).await?.len(), 0);
    Ok(())
}

#[tokio::test]
async fn the_block_list_pages_by_user_id() -> anyhow::Result<()> {
    let (db, _outbox) = schema().await?;
    for user in [9, 4, 7, 5] {
        store::set_blocked(&db.pool, ANN, user, true).await?;
    }
    store::set_blocked(&db.pool, BOB, 6, true).await?;
    store::set_blocked(&db.pool, ANN, 7, false).await?;
    // (after, limit, page)
    let cases: [(i64, i32, &[i64]); 4] = [
        (0, 10, &[4, 5, 9]),
        (0, 2, &[4, 5]),
        (5, 2, &[9]),
        (9, 10, &[]),
    ];
    for (after, limit, page) in cases {
        assert_eq!(
            store::blocked(&db.pool, ANN, after, limit).await?,
            page,
            "after {after}, limit {limit}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn blocked_by_names_the_owners_who_block_the_user() -> anyhow::Result<()> {
    let (db, _outbox) = schema().await?;
    store::set_blocked(&db.pool, ANN, CAROL, true).await?;
    store::set_blocked(&db.pool, BOB, CAROL, true).await?;
    store::set_blocked(&db.pool, BOB, CAROL, false).await?;
    store::set_blocked(&db.pool, CAROL, ANN, true).await?;
    let mut by = store::blocked_by(&db.pool, CAROL, &[ANN, BOB, 99]).await?;
    by.sort_unstable();
    assert_eq!(by, [ANN]);
    assert!(store::blocked_by(&db.pool, ANN, &[BOB]).await?.is_empty());
    assert_eq!(store::blocked_by(&db.pool, ANN, &[CAROL]).await?, [CAROL]);
    // The other way round: whom of these one owner blocked.
    assert_eq!(
        store::blocked_among(&db.pool, ANN, &[BOB, CAROL, 99]).await?,
        [CAROL]
    );
    assert!(
        store::blocked_among(&db.pool, BOB, &[CAROL])
            .await?
            .is_empty()
    );
    assert_eq!(store::blocked_among(&db.pool, CAROL, &[ANN]).await?, [ANN]);
    Ok(())
}

#[tokio::test]
async fn history_windows_seek_around_their_anchor() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let mut batch: Vec<NewMessage> = (1..=10)
        .map(|n| new(ANN, BOB, n, &format!("message {n}")))
        .collect();
    // Not of this dialog.
    batch.push(new(ANN, CAROL, 11, "elsewhere"));
    send::send(&db.pool, &outbox, &batch).await?;

    let window = |offset_id, add_offset, limit, max_id, min_id| HistoryWindow {
        owner: ANN,
        peer: BOB,
        offset_id,
        offset_date: 0,
        add_offset,
        limit,
        max_id,
        min_id,
    };
    // (window, the ids it shows, newest first)
    let cases: [(HistoryWindow, &[i64]); 7] = [
        (window(0, 0, 20, 0, 0), &[10, 9, 8, 7, 6, 5, 4, 3, 2, 1]),
        (window(0, 0, 3, 0, 0), &[10, 9, 8]),
        (window(5, 0, 3, 0, 0), &[4, 3, 2]),
        (window(5, -2, 4, 0, 0), &[6, 5, 4, 3]),
        (window(5, -3, 2, 0, 0), &[7, 6]),
        (window(0, 0, 20, 0, 7), &[10, 9, 8]),
        (window(0, 0, 20, 3, 0), &[2, 1]),
    ];
    for (w, ids) in cases {
        let shown: Vec<i64> = store::history(&db.pool, &w)
            .await?
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(
            shown, ids,
            "offset_id {} add_offset {} limit {} max_id {} min_id {}",
            w.offset_id, w.add_offset, w.limit, w.max_id, w.min_id
        );
    }
    // Bob's side of the same dialog.
    let bobs = store::history(
        &db.pool,
        &HistoryWindow {
            owner: BOB,
            peer: ANN,
            ..window(0, 0, 2, 0, 0)
        },
    )
    .await?;
    assert_eq!(
        bobs.iter()
            .map(|m| (m.id, m.out, m.text.as_str()))
            .collect::<Vec<_>>(),
        [(10, false, "message 10"), (9, false, "message 9")]
    );
    Ok(())
}

#[tokio::test]
async fn messages_by_id_are_the_owners_own() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    send::send(
        &db.pool,
        &outbox,
        &[new(ANN, BOB, 1, "one"), new(ANN, BOB, 2, "two")],
    )
    .await?;
    // (owner, ids asked, ids found, ascending and once each)
    let cases: [(i64, &[i64], &[i64]); 4] = [
        (ANN, &[2, 1, 2, 99], &[1, 2]),
        (BOB, &[2], &[2]),
        (CAROL, &[1, 2], &[]),
        (ANN, &[], &[]),
    ];
    for (owner, asked, found) in cases {
        let ids: Vec<i64> = by_ids(&db, owner, asked)
            .await?
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, found, "owner {owner} asking {asked:?}");
    }
    let [one] = &by_ids(&db, BOB, &[1]).await?[..] else {
        anyhow::bail!("Bob's first message");
    };
    assert_eq!(
        (
            one.from_user_id,
            one.peer_user(),
            one.out,
            one.text.as_str()
        ),
        (ANN, ANN, false, "one")
    );
    Ok(())
}

async fn edit_one(
    db: &Migrated,
    outbox: &Outbox,
    owner: i64,
    peer: i64,
    id: i64,
    text: &str,
) -> anyhow::Result<EditOutcome> {
    let request = Edit {
        owner_id: owner,
        peer_id: peer,
        auth_key_id: 7,
        request: EditMessageRequest {
            peer: Some(InputPeer::user(peer)),
            id,
            text: text.into(),
            ..Default::default()
        },
        traceparent: None,
    };
    Ok(edit::edit(&db.pool, outbox, &request).await?)
}

fn edit_kind(outcome: &EditOutcome) -> &'static str {
    match outcome {
        EditOutcome::Edited(_) => "edited",
        EditOutcome::IdInvalid => "id invalid",
        EditOutcome::AuthorRequired => "author required",
        EditOutcome::NotModified => "not modified",
        EditOutcome::Forbidden => "forbidden",
        EditOutcome::TextEmpty => "text empty",
        EditOutcome::CaptionTooLong => "caption too long",
    }
}

/// An edit to try: (editor, peer, her box id, text).
type EditCase = (i64, i64, i64, &'static str);
/// The same, with a text made at run time.
type EditTry<'a> = (i64, i64, i64, &'a str);

async fn outbox_rows(db: &Migrated) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE destination = 'updates'")
            .fetch_one(&db.pool)
            .await?,
    )
}

#[tokio::test]
async fn an_edit_changes_every_owners_box_and_logs_one_event_each() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    // Bob's box ids run ahead of Ann's, so each owner's view has its own id.
    sent(&send_one(&db, &outbox, new(BOB, CAROL, 1, "first")).await?)?;
    let original = send_one(&db, &outbox, new(ANN, BOB, 1, "helo")).await?;
    assert_eq!(sent(&original)?.message.id, 1);
    let before = outbox_rows(&db).await?;

    let outcome = edit_one(&db, &outbox, ANN, BOB, 1, "hello").await?;
    let EditOutcome::Edited(edited) = outcome else {
        anyhow::bail!("not edited: {}", edit_kind(&outcome));
    };
    assert_eq!(
        (
            edited.message.id,
            edited.message.out,
            edited.message.text.as_str()
        ),
        (1, true, "hello")
    );
    assert!(edited.message.edit_date > 0);
    // One event per owner, each with the owner's own view of the message.
    let views: Vec<(i64, i64, bool, String, i32, i64)> = edited
        .updates_events
        .iter()
        .map(|e| {
            let m = match e.update.as_ref().and_then(|u| u.kind.as_ref()) {
                Some(update::Kind::EditMessage(edit)) => edit.message.clone().unwrap_or_default(),
                _ => Message::default(),
            };
            (
                e.user_id,
                m.id,
                m.out,
                m.text,
                e.pts_count,
                e.origin_auth_key_id,
            )
        })
        .collect();
    assert_eq!(
        views,
        [
            (ANN, 1, true, "hello".to_owned(), 1, 7),
            (BOB, 2, false, "hello".to_owned(), 1, 7)
        ]
    );
    // Both events were written with the edit, in one outbox row.
    assert_eq!(outbox_rows(&db).await? - before, 1);
    assert_eq!(edited.updates_rows.len(), 2);

    let ann = by_ids(&db, ANN, &[1]).await?;
    let bob = by_ids(&db, BOB, &[2]).await?;
    for m in ann.iter().chain(&bob) {
        assert_eq!(
            (m.text.as_str(), m.edit_date),
            ("hello", edited.message.edit_date)
        );
    }
    assert_eq!((ann.len(), bob.len()), (1, 1));

    // A second edit is a new fact: new event ids.
    let again = edit_one(&db, &outbox, ANN, BOB, 1, "hello!").await?;
    let EditOutcome::Edited(again) = again else {
        anyhow::bail!("not edited: {}", edit_kind(&again));
    };
    for (first, second) in edited.updates_events.iter().zip(&again.updates_events) {
        assert_ne!(first.event_id, second.event_id);
    }

    // A note to self has one owner, one event.
    let note = send_one(&db, &outbox, new(ANN, ANN, 2, "note")).await?;
    let note_id = sent(&note)?.message.id;
    let outcome = edit_one(&db, &outbox, ANN, ANN, note_id, "a note").await?;
    let EditOutcome::Edited(note) = outcome else {
        anyhow::bail!("not edited: {}", edit_kind(&outcome));
    };
    assert_eq!(note.updates_events.len(), 1);
    Ok(())
}

#[tokio::test]
async fn refused_edits_change_nothing() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    // Ann's box 1 = Bob's box 1: Ann's message; box 2 on both sides: Bob's answer.
    sent(&send_one(&db, &outbox, new(ANN, BOB, 1, "hi")).await?)?;
    sent(&send_one(&db, &outbox, new(BOB, ANN, 1, "hey")).await?)?;
    store::set_blocked(&db.pool, CAROL, ANN, true).await?;
    sent(&send_one(&db, &outbox, new(ANN, CAROL, 2, "hi carol")).await?)?;
    let before = outbox_rows(&db).await?;

    let table: [(EditCase, &str); 6] = [
        ((BOB, ANN, 1, "not mine"), "author required"),
        ((ANN, BOB, 2, "not mine either"), "author required"),
        ((ANN, BOB, 1, "hi"), "not modified"),
        ((ANN, BOB, 99, "no such"), "id invalid"),
        ((ANN, CAROL, 1, "wrong dialog"), "id invalid"),
        ((ANN, CAROL, 3, "carol blocked me"), "forbidden"),
    ];
    for ((editor, peer, id, text), want) in table {
        let got = edit_one(&db, &outbox, editor, peer, id, text).await?;
        assert_eq!(edit_kind(&got), want, "{editor} edits #{id} to {text:?}");
    }
    assert_eq!(outbox_rows(&db).await?, before);
    let texts: Vec<(String, i64)> = by_ids(&db, ANN, &[1, 2, 3])
        .await?
        .into_iter()
        .map(|m| (m.text, m.edit_date))
        .collect();
    assert_eq!(
        texts,
        [
            ("hi".to_owned(), 0),
            ("hey".to_owned(), 0),
            ("hi carol".to_owned(), 0)
        ]
    );

    // Once unblocked, the edit reaches both boxes.
    store::set_blocked(&db.pool, CAROL, ANN, false).await?;
    let got = edit_one(&db, &outbox, ANN, CAROL, 3, "hi, Carol").await?;
    assert_eq!(edit_kind(&got), "edited");
    Ok(())
}

/// A search of Ann's messages for `text`, every filter open.
fn search_of(text: &str) -> SearchQuery {
    SearchQuery {
        owner: ANN,
        peer: 0,
        words: QueryWords::parse(text).unwrap_or_else(|refused| panic!("{text:?}: {refused:?}")),
        min_date: 0,
        max_date: i64::MAX,
        from: 0,
        below_id: i64::MAX,
        limit: 100,
    }
}

async fn page(db: &Migrated, q: &SearchQuery) -> anyhow::Result<(Vec<i64>, i64)> {
    let page = store::search(&db.pool, q).await?;
    Ok((
        page.messages.iter().map(|m| m.id).collect(),
        page.next_offset_id,
    ))
}

async fn found(db: &Migrated, q: &SearchQuery) -> anyhow::Result<Vec<i64>> {
    Ok(page(db, q).await?.0)
}

/// Runs the search indexer until the queue is empty; returns how many boxes it indexed.
async fn index_all(db: &Migrated) -> anyhow::Result<usize> {
    let mut indexed = 0;
    loop {
        match search_index::index_queued(&db.pool, search_index::BATCH).await? {
            0 => return Ok(indexed),
            n => indexed += n,
        }
    }
}

/// (owner, body) of every queued box.
async fn queued(db: &Migrated) -> anyhow::Result<Vec<(i64, i64)>> {
    Ok(
        sqlx::query_as("SELECT owner_id, body_id FROM search_queue ORDER BY 1, 2")
            .fetch_all(&db.pool)
            .await?,
    )
}

/// (owner, key, box id) of every indexed key.
async fn keys(db: &Migrated) -> anyhow::Result<Vec<(i64, String, i64)>> {
    Ok(
        sqlx::query_as("SELECT owner_id, word, box_id FROM message_words ORDER BY 1, 2, 3")
            .fetch_all(&db.pool)
            .await?,
    )
}

#[tokio::test]
async fn search_matches_word_beginnings_ignoring_case_queued_and_indexed() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    // Ann's box ids 1..=7; Bob's 1..=4 (his dialog with Ann); Carol's 1..=3.
    let batch = [
        new(ANN, BOB, 1, "Hello Bob, lunch today?"),
        new(BOB, ANN, 2, "HELLO ann! Lunch at noon"),
        new(ANN, CAROL, 3, "hello carol"),
        new(CAROL, ANN, 4, "Othello is on tonight"),
        new(ANN, BOB, 5, "100% sure_thing"),
        new(ANN, BOB, 6, "nothing to see"),
        new(CAROL, ANN, 7, "我说你好"),
    ];
    send::send(&db.pool, &outbox, &batch).await?;
    // A message of Bob's and Carol's dialog Ann is no part of.
    send_one(&db, &outbox, new(BOB, CAROL, 8, "hello from bob to carol")).await?;

    // (query, Ann's ids found, newest first)
    let cases: [(&str, &[i64]); 14] = [
        ("hello", &[3, 2, 1]),
        ("HeLLo", &[3, 2, 1]),
        ("lunch", &[2, 1]),
        ("lun hel", &[2, 1]),
        ("noon lunch", &[2]),
        ("hello noon carol", &[]),
        // A word's inside is not its beginning.
        ("thello", &[]),
        ("thing", &[5]),
        ("sure_thing", &[5]),
        ("100% sure", &[5]),
        ("nothin", &[6]),
        ("你好", &[7]),
        ("说", &[7]),
        ("zebra", &[]),
    ];
    // First from the queue alone, then from the index alone: two boxes per message.
    assert_eq!(queued(&db).await?.len(), 16);
    for indexed in [false, true] {
        if indexed {
            assert_eq!(index_all(&db).await?, 16);
            assert_eq!(queued(&db).await?, []);
        }
        for (text, ids) in cases {
            assert_eq!(
                found(&db, &search_of(text)).await?,
                ids,
                "query {text:?} indexed {indexed}"
            );
        }
        // Bob's view: his own ids, never Ann's dialogs with others.
        let bobs = SearchQuery {
            owner: BOB,
            ..search_of("hello")
        };
        let bobs = store::search(&db.pool, &bobs).await?.messages;
        assert_eq!(
            bobs.iter()
                .map(|m| (m.id, m.peer_user(), m.out))
                .collect::<Vec<_>>(),
            [(5, CAROL, true), (2, ANN, true), (1, ANN, false)],
            "indexed {indexed}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn the_indexer_keys_each_live_box_by_its_current_words() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    send::send(
        &db.pool,
        &outbox,
        &[new(ANN, BOB, 1, "Draft, draft!"), new(ANN, ANN, 2, "note")],
    )
    .await?;
    assert_eq!(index_all(&db).await?, 3);
    let k = |owner: i64, word: &str, box_id: i64| (owner, word.to_owned(), box_id);
    assert_eq!(
        keys(&db).await?,
        [k(ANN, "draft", 1), k(ANN, "note", 2), k(BOB, "draft", 1)]
    );

    // An edit queues both owners' boxes again; its new words are added.
    edit_one(&db, &outbox, ANN, BOB, 1, "final draft").await?;
    assert_eq!(queued(&db).await?, [(ANN, 1), (BOB, 1)]);
    assert_eq!(index_all(&db).await?, 2);
    assert_eq!(
        keys(&db).await?,
        [
            k(ANN, "draft", 1),
            k(ANN, "final", 1),
            k(ANN, "note", 2),
            k(BOB, "draft", 1),
            k(BOB, "final", 1)
        ]
    );

    // A delete in Ann's view queues her box alone, and removes her keys of it.
    delete_one(&db, &outbox, ANN, Targets::Ids(vec![1]), false).await?;
    assert_eq!(queued(&db).await?, [(ANN, 1)]);
    assert_eq!(index_all(&db).await?, 1);
    assert_eq!(
        keys(&db).await?,
        [k(ANN, "note", 2), k(BOB, "draft", 1), k(BOB, "final", 1)]
    );
    Ok(())
}

#[tokio::test]
async fn search_filters_by_peer_date_and_sender() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let batch: Vec<NewMessage> = (1..=8)
        .map(|n| {
            let (from, to) = match n % 3 {
                0 => (ANN, BOB),
                1 => (BOB, ANN),
                _ => (CAROL, ANN),
            };
            new(from, to, n, &format!("report {n}"))
        })
        .collect();
    send::send(&db.pool, &outbox, &batch).await?;
    // Ann's box n is dated 1000 * n.
    sqlx::query("UPDATE message_boxes SET date = box_id * 1000 WHERE owner_id = $1")
        .bind(ANN)
        .execute(&db.pool)
        .await?;

    // Ann's ids: 1 Bob→, 2 Carol→, 3 →Bob, 4 Bob→, 5 Carol→, 6 →Bob, 7 Bob→, 8 Carol→.
    let cases: [(SearchQuery, &[i64]); 7] = [
        (search_of("report"), &[8, 7, 6, 5, 4, 3, 2, 1]),
        (
            SearchQuery {
                peer: BOB,
                ..search_of("report")
            },
            &[7, 6, 4, 3, 1],
        ),
        (
            SearchQuery {
                peer: CAROL,
                ..search_of("report")
            },
            &[8, 5, 2],
        ),
        (
            SearchQuery {
                from: ANN,
                ..search_of("report")
            },
            &[6, 3],
        ),
        (
            SearchQuery {
                peer: BOB,
                from: BOB,
                ..search_of("report")
            },
            &[7, 4, 1],
        ),
        (
            SearchQuery {
                min_date: 3000,
                max_date: 5000,
                ..search_of("report")
            },
            &[5, 4, 3],
        ),
        (
            SearchQuery {
                min_date: 7000,
                ..search_of("report")
            },
            &[8, 7],
        ),
    ];
    for indexed in [false, true] {
        if indexed {
            index_all(&db).await?;
        }
        for (q, ids) in &cases {
            assert_eq!(
                found(&db, q).await?,
                *ids,
                "peer {} from {} dates {}..={} indexed {indexed}",
                q.peer,
                q.from,
                q.min_date,
                q.max_date
            );
        }
    }
    Ok(())
}

/// Every page of `q`, following next_offset_id: (ids of each page).
async fn pages(db: &Migrated, q: SearchQuery) -> anyhow::Result<Vec<Vec<i64>>> {
    let mut pages = Vec::new();
    let mut below_id = i64::MAX;
    loop {
        let (ids, next) = page(
            db,
            &SearchQuery {
                below_id,
                ..q.clone()
            },
        )
        .await?;
        pages.push(ids);
        if next == 0 {
            return Ok(pages);
        }
        anyhow::ensure!(
            next < below_id,
            "next_offset_id {next} does not move below {below_id}"
        );
        below_id = next;
    }
}

#[tokio::test]
async fn search_pages_return_every_match_once_newest_first() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let batch: Vec<NewMessage> = (1..=25)
        .map(|n| {
            let text = if n % 5 == 0 { "other" } else { "the needle" };
            new(ANN, BOB, n, &format!("{text} {n}"))
        })
        .collect();
    send::send(&db.pool, &outbox, &batch).await?;
    // The 12 oldest are indexed, the rest still queued: pages cross from one to the other.
    search_index::index_queued(&db.pool, 12).await?;

    let all: Vec<i64> = pages(
        &db,
        SearchQuery {
            limit: 7,
            ..search_of("needle")
        },
    )
    .await?
    .concat();
    let expected: Vec<i64> = (1..=25).rev().filter(|n| n % 5 != 0).collect();
    assert_eq!(all, expected);
    Ok(())
}

#[tokio::test]
async fn search_reads_the_current_text_and_skips_deleted_boxes() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    send::send(
        &db.pool,
        &outbox,
        &[
            new(ANN, BOB, 1, "first draft"),
            new(ANN, BOB, 2, "draft two"),
        ],
    )
    .await?;
    index_all(&db).await?;
    assert_eq!(found(&db, &search_of("draft")).await?, [2, 1]);
    // An edit changes the shared body: both owners find the new text only, before the
    // indexer takes it and after.
    edit_one(&db, &outbox, ANN, BOB, 1, "final version").await?;
    for _ in 0..2 {
        assert_eq!(found(&db, &search_of("draft")).await?, [2]);
        assert_eq!(found(&db, &search_of("final")).await?, [1]);
        index_all(&db).await?;
    }
    // A box deleted in Ann's view is gone from her search, not from Bob's.
    delete_one(&db, &outbox, ANN, Targets::Ids(vec![2]), false).await?;
    let bobs = SearchQuery {
        owner: BOB,
        ..search_of("draft")
    };
    for _ in 0..2 {
        assert_eq!(found(&db, &search_of("draft")).await?, Vec::<i64>::new());
        assert_eq!(found(&db, &bobs).await?, [2]);
        index_all(&db).await?;
    }
    Ok(())
}

#[tokio::test]
async fn search_reads_the_index_in_rounds_and_says_where_a_short_page_stops() -> anyhow::Result<()>
{
    let (db, outbox) = schema().await?;
    // 6 000 messages with the word, of which Bob sent only the first and every 1 000th.
    let n = 6_000;
    let batch: Vec<NewMessage> = (1..=n)
        .map(|i| match i % 1000 == 1 {
            true => new(BOB, ANN, i, &format!("needle {i}")),
            false => new(ANN, BOB, i, &format!("needle {i}")),
        })
        .collect();
    for chunk in batch.chunks(500) {
        send::send(&db.pool, &outbox, chunk).await?;
    }
    index_all(&db).await?;
    // The search reads the index in growing rounds until the page is full.
    let bobs = SearchQuery {
        from: BOB,
        limit: 2,
        ..search_of("needle")
    };
    assert_eq!(page(&db, &bobs).await?, (vec![5001, 4001], 4001));
    // A page reads a bounded number of candidates: past them it answers what it found and
    // where to go on, and the pages together hold every match once.
    let all = pages(&db, SearchQuery { limit: 10, ..bobs }).await?;
    assert!(all.len() > 1, "one page read every candidate: {all:?}");
    assert_eq!(all.concat(), [5001, 4001, 3001, 2001, 1001, 1]);
    Ok(())
}

fn bold(offset: i32, length: i32) -> MessageEntity {
    MessageEntity {
        kind: message_entity::Kind::Bold as i32,
        offset,
        length,
        ..Default::default()
    }
}

fn link(offset: i32, length: i32, url: &str) -> MessageEntity {
    MessageEntity {
        kind: message_entity::Kind::TextUrl as i32,
        offset,
        length,
        url: url.into(),
        ..Default::default()
    }
}

/// A reply of `sender` to her box `reply_to` quoting `quote` (bold as a whole) at `offset`.
fn quoting(
    sender: i64,
    peer: i64,
    random_id: i64,
    reply_to: i64,
    quote: &str,
    offset: Option<i32>,
) -> NewMessage {
    let mut m = replying(sender, peer, random_id, "a reply", reply_to);
    m.request.quote_text = quote.into();
    m.request.quote_entities = vec![bold(0, quote.encode_utf16().count() as i32)];
    m.request.quote_offset = offset;
    m.request_hash = format!("{peer}/{reply_to}/{quote}/{offset:?}").into_bytes();
    m
}

/// The random_id and message of a new-message event.
fn echo_of(event: &UserEvent) -> (i64, i64, Option<Message>) {
    match event.update.as_ref().and_then(|u| u.kind.as_ref()) {
        Some(update::Kind::NewMessage(n)) => (event.user_id, n.random_id, n.message.clone()),
        _ => (event.user_id, -1, None),
    }
}

#[tokio::test]
async fn entities_and_quotes_are_on_every_owners_view_and_event() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let entities = vec![bold(0, 5), link(6, 5, "https://example.com/")];
    let mut formatted = new(ANN, BOB, 1, "hello world, a 😀 smile");
    formatted.request.entities = entities.clone();
    let first = send_one(&db, &outbox, formatted).await?;
    let first = sent(&first)?;
    assert_eq!(first.message.entities, entities);
    for e in &first.updates_events {
        let (_, _, m) = echo_of(e);
        assert_eq!(
            m.map(|m| m.entities),
            Some(entities.clone()),
            "{}",
            e.user_id
        );
    }
    let ann = by_ids(&db, ANN, &[1]).await?;
    let bob = by_ids(&db, BOB, &[1]).await?;
    for m in ann.iter().chain(&bob) {
        assert_eq!(m.entities, entities);
        assert_eq!(m.reply_quote, None);
    }
    assert_eq!((ann.len(), bob.len()), (1, 1));

    // Bob quotes it: found anywhere (the offset is where it first occurs, in UTF-16 code
    // units) or at the offset given.
    let anywhere = send_one(&db, &outbox, quoting(BOB, ANN, 1, 1, "smile", None)).await?;
    let at = send_one(&db, &outbox, quoting(BOB, ANN, 2, 1, "world", Some(6))).await?;
    let quotes: Vec<(i64, Option<ReplyQuote>)> = [sent(&anywhere)?, sent(&at)?]
        .iter()
        .map(|s| (s.message.reply_to_msg_id, s.message.reply_quote.clone()))
        .collect();
    let quote = |text: &str, offset| ReplyQuote {
        text: text.into(),
        entities: vec![bold(0, text.encode_utf16().count() as i32)],
        offset,
    };
    assert_eq!(
        quotes,
        [(1, Some(quote("smile", 18))), (1, Some(quote("world", 6)))]
    );
    // Ann sees both quotes too, as replies to her own box 1.
    let ann: Vec<(i64, Option<ReplyQuote>)> = by_ids(&db, ANN, &[2, 3])
        .await?
        .into_iter()
        .map(|m| (m.reply_to_msg_id, m.reply_quote))
        .collect();
    assert_eq!(ann, quotes);
    Ok(())
}

#[tokio::test]
async fn a_quote_not_in_the_replied_text_takes_no_box_id_and_leaves_its_key_free()
-> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    send_one(&db, &outbox, new(ANN, BOB, 1, "the quick brown fox")).await?; // Ann 1, Bob 1

    // (quote, offset, what the reply becomes); every case uses the same key.
    let cases = [
        ("lazy dog", None, "quote invalid"),
        ("quick", Some(5), "quote invalid"),
        ("Quick", None, "quote invalid"),
        ("quick", Some(4), "sent"),
    ];
    for (carol_key, (quote, offset, expected)) in (1..).zip(cases) {
        let outcomes = send::send(
            &db.pool,
            &outbox,
            &[
                quoting(BOB, ANN, 9, 1, quote, offset),
                new(CAROL, ANN, carol_key, "beside it"),
            ],
        )
        .await?;
        assert_eq!(
            outcomes.iter().map(kind).collect::<Vec<_>>(),
            [expected, "sent"],
            "{quote:?} at {offset:?}"
        );
    }
    // No gap in Bob's box ids: only the accepted reply took one.
    let bob: Vec<i64> = by_ids(&db, BOB, &[1, 2, 3])
        .await?
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(bob, [1, 2]);
    Ok(())
}

#[tokio::test]
async fn only_the_senders_event_carries_the_random_id() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let outcomes = send::send(
        &db.pool,
        &outbox,
        &[new(ANN, BOB, 41, "to bob"), new(ANN, ANN, 42, "to me")],
    )
    .await?;
    let echoes: Vec<Vec<(i64, i64)>> = outcomes
        .iter()
        .map(|o| {
            Ok(sent(o)?
                .updates_events
                .iter()
                .map(|e| {
                    let (owner, random_id, _) = echo_of(e);
                    (owner, random_id)
                })
                .collect())
        })
        .collect::<anyhow::Result<_>>()?;
    assert_eq!(echoes, [vec![(ANN, 41), (BOB, 0)], vec![(ANN, 42)]]);
    // A replay's event is the sender's again, with her key.
    let replay = send_one(&db, &outbox, new(ANN, BOB, 41, "to bob")).await?;
    let SendOutcome::Replayed { event, .. } = replay else {
        anyhow::bail!("not replayed: {}", kind(&replay));
    };
    assert_eq!(echo_of(&event).1, 41);
    Ok(())
}

async fn delete_one(
    db: &Migrated,
    outbox: &Outbox,
    owner_id: i64,
    targets: Targets,
    revoke: bool,
) -> anyhow::Result<Option<Deleted>> {
    let delete = Delete {
        owner_id,
        auth_key_id: 7,
        targets,
        revoke,
        traceparent: None,
    };
    Ok(match delete::delete(&db.pool, outbox, &delete).await? {
        DeleteOutcome::Deleted(deleted) => Some(deleted),
        DeleteOutcome::Forbidden => None,
    })
}

/// Each event of a delete: (owner, ids, pts_count, per dialog: (peer, incoming ids, top,
/// boundary)).
type DeleteEvent = (i64, Vec<i64>, i32, Vec<(i64, Vec<i64>, i64, i64)>);

fn delete_events(deleted: &Deleted) -> Vec<DeleteEvent> {
    deleted
        .updates_events
        .iter()
        .map(|e| {
            let ids = match e.update.as_ref().and_then(|u| u.kind.as_ref()) {
                Some(update::Kind::DeleteMessages(d)) => d.ids.clone(),
                _ => vec![],
            };
            let dialogs = e
                .deletions
                .iter()
                .map(|d| (d.peer_user_id, d.incoming_ids.clone(), d.top_id, d.boundary))
                .collect();
            (e.user_id, ids, e.pts_count, dialogs)
        })
        .collect()
}

async fn history_ids(db: &Migrated, owner: i64, peer: i64) -> anyhow::Result<Vec<i64>> {
    let window = HistoryWindow {
        owner,
        peer,
        offset_id: 0,
        offset_date: 0,
        add_offset: 0,
        limit: 100,
        max_id: 0,
        min_id: 0,
    };
    Ok(store::history(&db.pool, &window)
        .await?
        .iter()
        .map(|m| m.id)
        .collect())
}

#[tokio::test]
async fn a_delete_hides_the_owners_boxes_and_a_revoke_the_peers_too() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    send::send(
        &db.pool,
        &outbox,
        &[
            new(ANN, BOB, 1, "one"),
            new(ANN, BOB, 2, "two"),
            new(ANN, BOB, 3, "three"),
            new(BOB, ANN, 1, "four"),
        ],
    )
    .await?;
    let rows_before = outbox_rows(&db).await?;

    // Ann's own view only: unknown ids skipped, 4 was incoming; Bob keeps everything.
    let deleted = delete_one(&db, &outbox, ANN, Targets::Ids(vec![4, 2, 99]), false)
        .await?
        .context("forbidden")?;
    assert_eq!(
        delete_events(&deleted),
        [(ANN, vec![2, 4], 2, vec![(BOB, vec![4], 3, 4)])]
    );
    assert_eq!(deleted.updates_rows.len(), 1);
    assert_eq!(outbox_rows(&db).await?, rows_before + 1);
    assert_eq!(history_ids(&db, ANN, BOB).await?, [3, 1]);
    assert_eq!(history_ids(&db, BOB, ANN).await?, [4, 3, 2, 1]);
    assert!(by_ids(&db, ANN, &[2, 4]).await?.is_empty());

    // Deleted already: nothing happens, nothing is logged.
    let again = delete_one(&db, &outbox, ANN, Targets::Ids(vec![2]), true)
        .await?
        .context("forbidden")?;
    assert!(again.updates_events.is_empty());
    assert_eq!(outbox_rows(&db).await?, rows_before + 1);

    // A revoke: Bob's box of the same message goes too, in his ids, with his own top.
    let deleted = delete_one(&db, &outbox, ANN, Targets::Ids(vec![3]), true)
        .await?
        .context("forbidden")?;
    assert_eq!(
        delete_events(&deleted),
        [
            (ANN, vec![3], 1, vec![(BOB, vec![], 1, 4)]),
            (BOB, vec![3], 1, vec![(ANN, vec![3], 4, 4)]),
        ]
    );
    assert_eq!(history_ids(&db, ANN, BOB).await?, [1]);
    assert_eq!(history_ids(&db, BOB, ANN).await?, [4, 2, 1]);
    // Bodies are shared: what Ann deleted alone Bob still reads.
    let texts: Vec<String> = by_ids(&db, BOB, &[2])
        .await?
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(texts, ["two"]);
    Ok(())
}

#[tokio::test]
async fn an_edit_of_the_entities_alone_modifies_the_message() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let mut formatted = new(ANN, BOB, 1, "hello world");
    formatted.request.entities = vec![bold(0, 5)];
    sent(&send_one(&db, &outbox, formatted).await?)?;

    let edit_entities = |entities: Vec<MessageEntity>| Edit {
        owner_id: ANN,
        peer_id: BOB,
        auth_key_id: 7,
        request: EditMessageRequest {
            peer: Some(InputPeer::user(BOB)),
            id: 1,
            text: "hello world".into(),
            entities,
            ..Default::default()
        },
        traceparent: None,
    };
    let same = edit::edit(&db.pool, &outbox, &edit_entities(vec![bold(0, 5)])).await?;
    assert_eq!(edit_kind(&same), "not modified");

    let new_entities = vec![bold(0, 5), link(6, 5, "tg://resolve?domain=world")];
    let outcome = edit::edit(&db.pool, &outbox, &edit_entities(new_entities.clone())).await?;
    let EditOutcome::Edited(edited) = outcome else {
        anyhow::bail!("not edited: {}", edit_kind(&outcome));
    };
    assert_eq!(edited.message.entities, new_entities);
    for e in &edited.updates_events {
        let Some(update::Kind::EditMessage(m)) = e.update.as_ref().and_then(|u| u.kind.as_ref())
        else {
            anyhow::bail!("not an edit");
        };
        assert_eq!(m.message.as_ref().map(|m| &m.entities), Some(&new_entities));
    }
    for (owner, id) in [(ANN, 1), (BOB, 1)] {
        let m = by_ids(&db, owner, &[id]).await?;
        assert_eq!(m.len(), 1);
        assert!(m.iter().all(|m| m.entities == new_entities));
    }
    // Without entities: modified again, stored as none.
    let outcome = edit::edit(&db.pool, &outbox, &edit_entities(vec![])).await?;
    assert_eq!(edit_kind(&outcome), "edited");
    let m = by_ids(&db, BOB, &[1]).await?;
    assert!(m.iter().all(|m| m.entities.is_empty()) && m.len() == 1);
    Ok(())
}

#[tokio::test]
async fn a_revoke_towards_a_user_who_blocked_the_caller_is_refused() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    send::send(&db.pool, &outbox, &[new(ANN, BOB, 1, "one")]).await?;
    store::set_blocked(&db.pool, BOB, ANN, true).await?;
    let rows_before = outbox_rows(&db).await?;
    // (targets, revoke, refused)
    let cases = [
        (Targets::Ids(vec![1]), true, true),
        (
            Targets::History {
                peer: BOB,
                max_id: i64::MAX,
                just_clear: false,
            },
            true,
            true,
        ),
        (Targets::Ids(vec![1]), false, false),
    ];
    for (i, (targets, revoke, refused)) in cases.into_iter().enumerate() {
        let got = delete_one(&db, &outbox, ANN, targets, revoke).await?;
        assert_eq!(got.is_none(), refused, "case {i}");
        if refused {
            assert_eq!(history_ids(&db, ANN, BOB).await?, [1], "case {i}");
            assert_eq!(outbox_rows(&db).await?, rows_before, "case {i}");
        }
    }
    assert_eq!(history_ids(&db, ANN, BOB).await?, Vec::<i64>::new());
    assert_eq!(history_ids(&db, BOB, ANN).await?, [1]);
    Ok(())
}

#[tokio::test]
async fn a_history_is_cleared_newest_first_in_bounded_batches() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let total = 2 * MAX_DELETE_BATCH as i64 + 100;
    let mut batch: Vec<NewMessage> = (1..=total)
        .map(|n| new(ANN, BOB, n, &format!("message {n}")))
        .collect();
    batch.push(new(ANN, CAROL, total + 1, "elsewhere"));
    for chunk in batch.chunks(500) {
        send::send(&db.pool, &outbox, chunk).await?;
    }
    let clear = |max_id: i64| Targets::History {
        peer: BOB,
        max_id,
        just_clear: false,
    };
    // Up to message 50 only: those above it stay.
    let first = delete_one(&db, &outbox, ANN, clear(50), true)
        .await?
        .context("forbidden")?;
    let events = delete_events(&first);
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].1, (1..=50).collect::<Vec<i64>>());
    assert_eq!(events[0].3, [(BOB, vec![], total, total + 1)]);
    assert!(!first.more);
    // The rest, newest first: 1000, 1000, then the last 50.
    let mut batches = Vec::new();
    loop {
        let deleted = delete_one(&db, &outbox, ANN, clear(i64::MAX), false)
            .await?
            .context("forbidden")?;
        let events = delete_events(&deleted);
        assert_eq!(events.len(), 1, "the peer keeps her boxes without a revoke");
        let (owner, ids, count, dialogs) = &events[0];
        batches.push((
            *owner,
            ids.first().copied(),
            ids.last().copied(),
            *count,
            dialogs[0].2,
            deleted.more,
        ));
        if !deleted.more {
            break;
        }
    }
    assert_eq!(
        batches,
        [
            (ANN, Some(1101), Some(2100), 1000, 1100, true),
            (ANN, Some(101), Some(1100), 1000, 100, true),
            (ANN, Some(51), Some(100), 50, 0, false),
        ]
    );
    assert_eq!(history_ids(&db, ANN, BOB).await?, Vec::<i64>::new());
    assert_eq!(history_ids(&db, ANN, CAROL).await?, [total + 1]);
    // Bob lost only the 50 revoked: his oldest box left is 51.
    let bobs_oldest = store::history(
        &db.pool,
        &HistoryWindow {
            owner: BOB,
            peer: ANN,
            offset_id: 0,
            offset_date: 0,
            add_offset: 0,
            limit: 1,
            max_id: 52,
            min_id: 0,
        },
    )
    .await?;
    assert_eq!(bobs_oldest.iter().map(|m| m.id).collect::<Vec<_>>(), [51]);
    // Nothing left: a call deletes nothing and says so.
    let done = delete_one(&db, &outbox, ANN, clear(i64::MAX), false)
        .await?
        .context("forbidden")?;
    assert!(done.updates_events.is_empty() && !done.more);
    Ok(())
}

/// A send of a media message of `kind`.
fn with_media(sender: i64, peer: i64, random_id: i64, kind: message_media::Kind) -> NewMessage {
    let mut m = new(sender, peer, random_id, "");
    m.request.media = Some(MessageMedia {
        kind: kind as i32,
        file_id: random_id,
        size: 10,
        sha256: format!("{random_id:064}"),
        ..MessageMedia::default()
    });
    m
}

#[tokio::test]
async fn a_caption_may_be_emptied_by_an_edit_a_text_may_not() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    // Box 1: Ann's document captioned "the report"; box 2: Ann's text.
    let mut doc = with_media(ANN, BOB, 1, message_media::Kind::Document);
    doc.request.text = "the report".into();
    sent(&send_one(&db, &outbox, doc).await?)?;
    sent(&send_one(&db, &outbox, new(ANN, BOB, 2, "hello")).await?)?;
    let long_caption = "é".repeat(1025);

    let table: [(EditTry, &str); 4] = [
        ((ANN, BOB, 2, "  "), "text empty"),
        ((ANN, BOB, 1, &long_caption), "caption too long"),
        ((ANN, BOB, 1, ""), "edited"),
        ((ANN, BOB, 1, ""), "not modified"),
    ];
    for ((editor, peer, id, text), want) in table {
        let got = edit_one(&db, &outbox, editor, peer, id, text).await?;
        assert_eq!(
            edit_kind(&got),
            want,
            "{editor} edits #{id} to {:.20?}",
            text
        );
    }
    let shown: Vec<(String, bool)> = by_ids(&db, BOB, &[1, 2])
        .await?
        .into_iter()
        .map(|m| (m.text, m.media.is_some()))
        .collect();
    assert_eq!(shown, [(String::new(), true), ("hello".to_owned(), false)]);
    Ok(())
}

async fn read_contents_of(
    db: &Migrated,
    outbox: &Outbox,
    owner_id: i64,
    ids: Vec<i64>,
) -> anyhow::Result<Vec<(i64, Vec<i64>, i64)>> {
    let read = ReadContents {
        owner_id,
        auth_key_id: 9,
        ids,
        traceparent: None,
    };
    let ContentsRead {
        updates_events,
        updates_rows,
    } = read_contents::read_contents(&db.pool, outbox, &read).await?;
    anyhow::ensure!(
        updates_events.is_empty() == updates_rows.is_empty(),
        "an outbox row for the events"
    );
    updates_events
        .into_iter()
        .map(|e| match e.update.and_then(|u| u.kind) {
            Some(update::Kind::ReadMessageContents(r)) => {
                anyhow::ensure!(e.pts_count == 1 && r.date == e.date);
                Ok((e.user_id, r.messages, e.origin_auth_key_id))
            }
            other => anyhow::bail!("not a read-contents event: {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn playing_a_note_clears_both_boxes_once_and_logs_an_event_for_each_owner()
-> anyhow::Result<()> {
    use message_media::Kind;
    let (db, outbox) = schema().await?;
    // Ann sends Bob a voice note, a video note and a document; Bob sends Ann a voice note.
    let mut ann_ids = Vec::new();
    for (n, kind) in [(1, Kind::Voice), (2, Kind::VideoNote), (3, Kind::Document)] {
        let outcome = send_one(&db, &outbox, with_media(ANN, BOB, n, kind)).await?;
        ann_ids.push(sent(&outcome)?.message.id);
    }
    let bobs_own = send_one(&db, &outbox, with_media(BOB, ANN, 4, Kind::Voice)).await?;
    let bobs_own = sent(&bobs_own)?.message.id;
    let ann_view = by_ids(&db, ANN, &ann_ids).await?;
    let unread: Vec<bool> = ann_view.iter().map(|m| m.media_unread).collect();
    assert_eq!(
        unread,
        vec![true, true, false],
        "the sender's notes start unplayed"
    );
    let bob_ids: Vec<i64> = (1..=3).collect();
    let unread: Vec<bool> = by_ids(&db, BOB, &bob_ids)
        .await?
        .iter()
        .map(|m| m.media_unread)
        .collect();
    assert_eq!(unread, vec![true, true, false]);
    let before = outbox_rows(&db).await?;

    // Nothing to play: no event, no outbox row. Bob's own outgoing note is not his to play,
    // Ann's ids are not his, and the document has no note.
    let table: [(i64, Vec<i64>); 4] = [
        (BOB, vec![]),
        (BOB, vec![bobs_own]),
        (BOB, vec![3, 99]),
        (CAROL, vec![1, 2]),
    ];
    for (i, (owner, ids)) in table.into_iter().enumerate() {
        assert!(
            read_contents_of(&db, &outbox, owner, ids).await?.is_empty(),
            "row {i}"
        );
    }
    assert_eq!(outbox_rows(&db).await?, before);

    // Bob plays the voice note (and names the document): his box and Ann's change.
    let events = read_contents_of(&db, &outbox, BOB, vec![1, 3]).await?;
    assert_eq!(
        events,
        vec![(BOB, vec![1], 9), (ANN, vec![ann_ids[0]], 0)],
        "the caller's event first, from her device; the sender's in her ids"
    );
    assert!(!by_ids(&db, BOB, &[1]).await?[0].media_unread);
    assert!(!by_ids(&db, ANN, &[ann_ids[0]]).await?[0].media_unread);
    assert!(
        by_ids(&db, BOB, &[2]).await?[0].media_unread,
        "only what was played"
    );
    assert_eq!(
        outbox_rows(&db).await?,
        before + 1,
        "one outbox row for both events"
    );

    // Once: a repeat changes nothing. Two concurrent reads of the video note: one wins.
    assert!(
        read_contents_of(&db, &outbox, BOB, vec![1])
            .await?
            .is_empty()
    );
    let (a, b) = tokio::join!(
        read_contents_of(&db, &outbox, BOB, vec![2]),
        read_contents_of(&db, &outbox, BOB, vec![2, 1])
    );
    let (a, b) = (a?, b?);
    assert_eq!(
        a.len() + b.len(),
        2,
        "one pair of events between them: {a:?} {b:?}"
    );

    // A deleted box is not played, and its sender's box stays unplayed.
    let fourth = send_one(&db, &outbox, with_media(ANN, BOB, 5, Kind::Voice)).await?;
    // Bob's fifth box: his own note to Ann took his fourth.
    let (ann_fourth, bob_fourth) = (sent(&fourth)?.message.id, 5);
    let deleted = delete::delete(
        &db.pool,
        &outbox,
        &Delete {
            owner_id: BOB,
            auth_key_id: 9,
            targets: Targets::Ids(vec![bob_fourth]),
            revoke: false,
            traceparent: None,
        },
    )
    .await?;
    assert!(matches!(deleted, DeleteOutcome::Deleted(_)));
    assert!(
        read_contents_of(&db, &outbox, BOB, vec![bob_fourth])
            .await?
            .is_empty()
    );
    assert!(by_ids(&db, ANN, &[ann_fourth]).await?[0].media_unread);
    Ok(())
}

#[tokio::test]
async fn a_note_to_saved_messages_is_never_unplayed() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let outcome = send_one(
        &db,
        &outbox,
        with_media(ANN, ANN, 1, message_media::Kind::Voice),
    )
    .await?;
    let id = sent(&outcome)?.message.id;
    assert!(!by_ids(&db, ANN, &[id]).await?[0].media_unread);
    assert!(
        read_contents_of(&db, &outbox, ANN, vec![id])
            .await?
            .is_empty()
    );
    Ok(())
}

/// One owner's reaction event as a test compares it: (owner, her msg_id, reactions as
/// (reaction, count, chosen_by_me), reaction_unread, the unread delta, the origin device).
type ReactionEvent = (i64, i64, Vec<(String, i32, bool)>, bool, i32, i64);

fn counts(reactions: &[ReactionCount]) -> Vec<(String, i32, bool)> {
    reactions
        .iter()
        .map(|r| (r.reaction.clone(), r.count, r.chosen_by_me))
        .collect()
}

fn shown(reactions: &[(&str, i32, bool)]) -> Vec<(String, i32, bool)> {
    reactions
        .iter()
        .map(|(r, n, mine)| ((*r).to_owned(), *n, *mine))
        .collect()
}

/// `owner_id` reacts (`reaction`, empty: removes hers) to her box `msg_id` of the dialog
/// with `peer_id`: the events, or the refusal's name.
async fn react_as(
    db: &Migrated,
    outbox: &Outbox,
    owner_id: i64,
    peer_id: i64,
    msg_id: i64,
    reaction: &str,
) -> anyhow::Result<Result<Vec<ReactionEvent>, &'static str>> {
    let react = React {
        owner_id,
        peer_id,
        auth_key_id: 9,
        msg_id,
        reaction: reaction.into(),
        traceparent: None,
    };
    let logged = match reactions::react(&db.pool, outbox, &react).await? {
        ReactOutcome::Changed(logged) => logged,
        ReactOutcome::IdInvalid => return Ok(Err("id invalid")),
        ReactOutcome::Blocked => return Ok(Err("blocked")),
    };
    anyhow::ensure!(
        logged.updates_events.len() == logged.updates_rows.len(),
        "an outbox row for each event"
    );
    let mut events = Vec::new();
    for e in logged.updates_events {
        let Some(update::Kind::MessageReactions(r)) = e.update.and_then(|u| u.kind) else {
            anyhow::bail!("not a reactions event");
        };
        anyhow::ensure!(e.pts_count == 1, "pts_count 1");
        anyhow::ensure!(r.peer.is_some(), "the event names its dialog");
        events.push((
            e.user_id,
            r.msg_id,
            counts(&r.reactions),
            r.reaction_unread,
            e.unread_reactions_delta,
            e.origin_auth_key_id,
        ));
    }
    events.sort_by_key(|e| e.0);
    Ok(Ok(events))
}

/// The reactions and the unread flag of `owner`'s box `id`.
async fn reactions_on(
    db: &Migrated,
    owner: i64,
    id: i64,
) -> anyhow::Result<(Vec<(String, i32, bool)>, bool)> {
    let m = by_ids(db, owner, &[id])
        .await?
        .pop()
        .context("no message")?;
    Ok((counts(&m.reactions), m.reaction_unread))
}

#[tokio::test]
async fn a_reaction_is_set_replaced_and_removed_on_both_boxes_and_unread_for_the_author()
-> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    // Ann's message is her box 1 and Bob's box 1; Bob's own message is box 2 of both.
    sent(&send_one(&db, &outbox, new(ANN, BOB, 1, "look")).await?)?;
    sent(&send_one(&db, &outbox, new(BOB, ANN, 1, "nice")).await?)?;

    // Bob reacts to Ann's message: both owners' events, in their ids; unread for Ann.
    let events = react_as(&db, &outbox, BOB, ANN, 1, "👍").await?;
    assert_eq!(
        events,
        Ok(vec![
            (ANN, 1, shown(&[("👍", 1, false)]), true, 1, 0),
            (BOB, 1, shown(&[("👍", 1, true)]), false, 0, 9),
        ])
    );
    assert_eq!(
        reactions_on(&db, ANN, 1).await?,
        (shown(&[("👍", 1, false)]), true)
    );
    assert_eq!(
        reactions_on(&db, BOB, 1).await?,
        (shown(&[("👍", 1, true)]), false)
    );

    // The same reaction again changes nothing and logs nothing.
    assert_eq!(react_as(&db, &outbox, BOB, ANN, 1, "👍").await?, Ok(vec![]));

    // A replacement: one reaction of Bob's still, still unread, the count does not move.
    let events = react_as(&db, &outbox, BOB, ANN, 1, "❤").await?;
    assert_eq!(
        events,
        Ok(vec![
            (ANN, 1, shown(&[("❤", 1, false)]), true, 0, 0),
            (BOB, 1, shown(&[("❤", 1, true)]), false, 0, 9),
        ])
    );

    // Ann's own reaction to her message is never unread for her.
    let events = react_as(&db, &outbox, ANN, BOB, 1, "🔥").await?;
    assert_eq!(
        events,
        Ok(vec![
            (
                ANN,
                1,
                shown(&[("❤", 1, false), ("🔥", 1, true)]),
                true,
                0,
                9
            ),
            (
                BOB,
                1,
                shown(&[("❤", 1, true), ("🔥", 1, false)]),
                false,
                0,
                0
            ),
        ])
    );

    // Bob removes his before Ann saw it: the unread goes back.
    let events = react_as(&db, &outbox, BOB, ANN, 1, "").await?;
    assert_eq!(
        events,
        Ok(vec![
            (ANN, 1, shown(&[("🔥", 1, true)]), false, -1, 0),
            (BOB, 1, shown(&[("🔥", 1, false)]), false, 0, 9),
        ])
    );
    // Removing a reaction he no longer has changes nothing.
    assert_eq!(react_as(&db, &outbox, BOB, ANN, 1, "").await?, Ok(vec![]));

    // The same reaction from both: one count of 2.
    react_as(&db, &outbox, BOB, ANN, 1, "🔥")
        .await?
        .ok()
        .context("reacted")?;
    assert_eq!(
        reactions_on(&db, BOB, 1).await?,
        (shown(&[("🔥", 2, true)]), false)
    );

    // Ann reacts to Bob's message: unread for Bob (his box 2).
    let events = react_as(&db, &outbox, ANN, BOB, 2, "😂").await?;
    assert_eq!(
        events,
        Ok(vec![
            (ANN, 2, shown(&[("😂", 1, true)]), false, 0, 9),
            (BOB, 2, shown(&[("😂", 1, false)]), true, 1, 0),
        ])
    );

    // Deleting Bob's box with its unread reaction: his dialog's count goes down with it, in
    // the delete's event; Ann's box of the message held none unread.
    let deleted = delete_one(&db, &outbox, BOB, Targets::Ids(vec![2]), true)
        .await?
        .context("deleted")?;
    let unread: Vec<(i64, i32)> = deleted
        .updates_events
        .iter()
        .flat_map(|e| e.deletions.iter().map(|d| (e.user_id, d.unread_reactions)))
        .collect();
    assert_eq!(unread, [(BOB, 1), (ANN, 0)]);

    // Refusals: a message of another dialog, an id she has no box of, a user without it.
    let refused = [
        react_as(&db, &outbox, BOB, CAROL, 1, "👍").await?,
        react_as(&db, &outbox, BOB, ANN, 99, "👍").await?,
        react_as(&db, &outbox, CAROL, ANN, 1, "👍").await?,
    ];
    assert_eq!(
        refused,
        [Err("id invalid"), Err("id invalid"), Err("id invalid")]
    );
    Ok(())
}

/// `owner_id` reads the reactions of the dialog with `peer_id`: (messages, delta) of each event.
async fn read_reactions_of(
    db: &Migrated,
    outbox: &Outbox,
    owner_id: i64,
    peer_id: i64,
) -> anyhow::Result<Vec<(Vec<i64>, i32)>> {
    let read = ReadReactions {
        owner_id,
        peer_id,
        auth_key_id: 9,
        traceparent: None,
    };
    let logged = reactions::read_reactions(&db.pool, outbox, &read).await?;
    anyhow::ensure!(logged.updates_events.len() == logged.updates_rows.len());
    logged
        .updates_events
        .into_iter()
        .map(|e| match e.update.and_then(|u| u.kind) {
            Some(update::Kind::ReadReactions(r)) => {
                anyhow::ensure!(e.user_id == owner_id && e.origin_auth_key_id == 9);
                anyhow::ensure!(r.peer.and_then(|p| p.user_id()) == Some(peer_id));
                Ok((r.messages, e.unread_reactions_delta))
            }
            other => anyhow::bail!("not a read-reactions event: {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn reading_reactions_clears_the_dialogs_unread_ones_once() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    // Ann's boxes 1 and 2 to Bob, 3 to Carol; Bob reacts to 1 and 2, Carol to 3.
    for n in 1..=2 {
        sent(&send_one(&db, &outbox, new(ANN, BOB, n, "to bob")).await?)?;
    }
    sent(&send_one(&db, &outbox, new(ANN, CAROL, 3, "to carol")).await?)?;
    for id in [1, 2] {
        react_as(&db, &outbox, BOB, ANN, id, "👍")
            .await?
            .ok()
            .context("reacted")?;
    }
    react_as(&db, &outbox, CAROL, ANN, 1, "🎉")
        .await?
        .ok()
        .context("reacted")?;

    assert_eq!(
        read_reactions_of(&db, &outbox, ANN, BOB).await?,
        [(vec![1, 2], -2)]
    );
    for id in [1, 2] {
        assert!(!reactions_on(&db, ANN, id).await?.1, "box {id} read");
    }
    // Carol's dialog is another: still unread.
    assert!(
        reactions_on(&db, ANN, 3).await?.1,
        "Carol's dialog is unread still"
    );
    // A repeat reads nothing and logs nothing.
    assert_eq!(read_reactions_of(&db, &outbox, ANN, BOB).await?, []);
    // Bob's side had nothing unread.
    assert_eq!(read_reactions_of(&db, &outbox, BOB, ANN).await?, []);

    // In Saved Messages there is one box and one owner: one event, nothing unread.
    let note = sent(&send_one(&db, &outbox, new(ANN, ANN, 4, "note")).await?)?
        .message
        .id;
    assert_eq!(
        react_as(&db, &outbox, ANN, ANN, note, "⭐").await?,
        Ok(vec![(ANN, note, shown(&[("⭐", 1, true)]), false, 0, 9)])
    );
    Ok(())
}

/// The plan lines of a read of `owner`'s messages `ids` (sql/messages_of_boxes.sql over
/// sql/boxes_by_ids.sql) that scan message_reactions, as `EXPLAIN ANALYZE` ran them.
async fn reaction_scans(db: &Migrated, owner: i64, ids: &[i64]) -> anyhow::Result<Vec<String>> {
    let read = include_str!("../sql/messages_of_boxes.sql")
        .replace("{box_query}", include_str!("../sql/boxes_by_ids.sql"));
    let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {read}"
    )))
    .bind(owner)
    .bind(ids)
    .fetch_all(&db.pool)
    .await?;
    Ok(plan
        .into_iter()
        .filter(|line| line.contains("on message_reactions"))
        .collect())
}

#[tokio::test]
async fn a_read_looks_up_reactions_only_for_bodies_ever_reacted_to() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    sent(&send_one(&db, &outbox, new(ANN, BOB, 1, "one")).await?)?;
    sent(&send_one(&db, &outbox, new(ANN, BOB, 2, "two")).await?)?;
    let never_run = |scans: &[String]| scans.iter().all(|s| s.contains("never executed"));

    // No body reacted to: the page never scans message_reactions.
    let scans = reaction_scans(&db, BOB, &[1, 2]).await?;
    anyhow::ensure!(!scans.is_empty(), "the read has a reactions lookup");
    assert!(never_run(&scans), "{scans:#?}");

    // One reaction: its body is looked up, and shows it.
    react_as(&db, &outbox, BOB, ANN, 1, "👍")
        .await?
        .ok()
        .context("reacted")?;
    assert!(!never_run(&reaction_scans(&db, BOB, &[1, 2]).await?));
    assert_eq!(
        reactions_on(&db, BOB, 1).await?.0,
        shown(&[("👍", 1, true)])
    );
    assert_eq!(reactions_on(&db, BOB, 2).await?.0, shown(&[]));

    // Removed again: still looked up (the mark stays), and none shown.
    react_as(&db, &outbox, BOB, ANN, 1, "")
        .await?
        .ok()
        .context("removed")?;
    assert!(!never_run(&reaction_scans(&db, BOB, &[1, 2]).await?));
    assert_eq!(reactions_on(&db, ANN, 1).await?.0, shown(&[]));
    Ok(())
}
