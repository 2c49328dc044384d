//! Peers through the gateway: every call that names a dialog takes an `InputPeer` and applies
//! the one rule to it (missing, of no kind, a user id ≤ 0 or no such user: `PEER_ID_INVALID`),
//! and `self` is the caller's Saved Messages, the same dialog as her own user id.

use std::time::Duration;

use anyhow::Context;
use oxigram_proto::{
    api::v1::{
        EditMessageRequest, GetDialogsRequest, GetHistoryRequest, GetOutboxReadDateRequest,
        ReadHistoryRequest, SearchRequest, SendMessageRequest,
    },
    types::v1::InputPeer,
};
use oxigram_tests::{Mode, System, TestClient, client::code, eventually};
use tonic::Status;

/// The code a call answered, or "OK".
fn outcome<T>(result: Result<T, Status>) -> String {
    match result {
        Ok(_) => "OK".into(),
        Err(status) => code(&status).unwrap_or_else(|| format!("{status:?}")),
    }
}

/// Calls each dialog-naming method with `peer`; the code each answered, in the order of
/// [`CALLS`]. `id` is one of the caller's outgoing messages to the peer.
async fn call_each(
    device: &TestClient,
    peer: Option<InputPeer>,
    id: i64,
    random_id: i64,
) -> Vec<String> {
    let m = device.messages();
    vec![
        outcome(
            m.clone()
                .send_message(SendMessageRequest {
                    peer,
                    random_id,
                    text: "to whom?".into(),
                    ..Default::default()
                })
                .await,
        ),
        outcome(
            m.clone()
                .edit_message(EditMessageRequest {
                    peer,
                    id,
                    text: format!("edited {random_id}"),
                    ..Default::default()
                })
                .await,
        ),
        outcome(
            m.clone()
                .get_history(GetHistoryRequest {
                    peer,
                    ..Default::default()
                })
                .await,
        ),
        outcome(
            m.clone()
                .read_history(ReadHistoryRequest { peer, max_id: 0 })
                .await,
        ),
        outcome(
            m.clone()
                .get_outbox_read_date(GetOutboxReadDateRequest { peer, msg_id: id })
                .await,
        ),
        outcome(
            m.clone()
                .search(SearchRequest {
                    peer,
                    q: "whom".into(),
                    ..Default::default()
                })
                .await,
        ),
    ]
}

const CALLS: [&str; 6] = [
    "SendMessage",
    "EditMessage",
    "GetHistory",
    "ReadHistory",
    "GetOutboxReadDate",
    "Search",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_naming_a_dialog_applies_the_one_peer_rule() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15558201", "Alice"), ("15558202", "Bob")])
        .await?;
    let bob_id = bob.user_id()?;
    let sent = alice.send(bob_id, 1, "hello Bob").await?;
    let id = sent.message.context("no message")?.id;

    let invalid = "PEER_ID_INVALID";
    // (peer, the code of each call in CALLS' order).
    let table: [(&str, Option<InputPeer>, [&str; 6]); 5] = [
        // Search without a peer searches every dialog; every other call needs one.
        (
            "missing",
            None,
            [invalid, invalid, invalid, invalid, invalid, "OK"],
        ),
        ("of no kind", Some(InputPeer::default()), [invalid; 6]),
        ("user 0", Some(InputPeer::user(0)), [invalid; 6]),
        ("user -1", Some(InputPeer::user(-1)), [invalid; 6]),
        // No such user. GetOutboxReadDate names the caller's own message, which has no dialog
        // with that user.
        (
            "no such user",
            Some(InputPeer::user(987_654_321)),
            [
                invalid,
                invalid,
                invalid,
                invalid,
                "MESSAGE_ID_INVALID",
                invalid,
            ],
        ),
    ];
    for (i, (name, peer, expected)) in table.into_iter().enumerate() {
        let got = call_each(&alice, peer, id, 100 + i as i64).await;
        for ((call, got), expected) in CALLS.iter().zip(&got).zip(expected) {
            assert_eq!(got, expected, "{call} with a peer {name}");
        }
    }
    // Nothing of that was stored: Bob has the one message, Alice's log only her send.
    assert_eq!(bob.history(alice.user_id()?).await?.len(), 1);
    assert_eq!(alice.difference(0).await?.updates.len(), 1);

    // A valid user peer passes every call (the read date: Bob has not read it yet).
    let got = call_each(&alice, Some(InputPeer::user(bob_id)), id, 200).await;
    assert_eq!(
        got,
        ["OK", "OK", "OK", "OK", "MESSAGE_NOT_READ_YET", "OK"],
        "{CALLS:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_is_saved_messages_the_same_dialog_as_the_callers_own_id() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15558301", "Alice"), ("15558302", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    alice.send(bob_id, 1, "a note for Bob").await?;

    let note = SendMessageRequest {
        peer: Some(InputPeer::me()),
        random_id: 2,
        text: "a note to self".into(),
        ..Default::default()
    };
    let sent = alice
        .messages()
        .send_message(note.clone())
        .await?
        .into_inner();
    let saved = sent.message.context("no message")?;
    assert_eq!(
        (saved.peer_user(), saved.from_user_id, saved.out),
        (alice_id, alice_id, true)
    );
    assert_eq!(sent.pts_count, 1, "Saved Messages: one box, one update");
    // The same key towards her own id is the same request: the original answers.
    let again = SendMessageRequest {
        peer: Some(InputPeer::user(alice_id)),
        ..note
    };
    let replayed = alice.messages().send_message(again).await?.into_inner();
    assert_eq!(replayed.message.map(|m| m.id), Some(saved.id));

    // History, edit, search and read of `self` all act on that one dialog.
    let history = alice
        .messages()
        .get_history(GetHistoryRequest {
            peer: Some(InputPeer::me()),
            ..Default::default()
        })
        .await?
        .into_inner();
    let ids: Vec<(i64, i64)> = history
        .messages
        .iter()
        .map(|m| (m.id, m.peer_user()))
        .collect();
    assert_eq!(ids, [(saved.id, alice_id)]);
    let edited = alice
        .messages()
        .edit_message(EditMessageRequest {
            peer: Some(InputPeer::me()),
            id: saved.id,
            text: "a note to self, edited".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(
        edited.message.map(|m| m.text).as_deref(),
        Some("a note to self, edited")
    );
    let found = alice
        .messages()
        .search(SearchRequest {
            peer: Some(InputPeer::me()),
            q: "note".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let found: Vec<i64> = found.messages.iter().map(|m| m.id).collect();
    assert_eq!(found, [saved.id], "the note to Bob is in another dialog");
    alice
        .messages()
        .read_history(ReadHistoryRequest {
            peer: Some(InputPeer::me()),
            max_id: 0,
        })
        .await?;

    // Her dialogs name Saved Messages by her own id, and page by the `peer` they give.
    let mut want = vec![alice_id, bob_id];
    want.sort_unstable();
    eventually(Duration::from_secs(10), "both dialogs", || async {
        let mut peers: Vec<i64> = alice
            .dialogs_page()
            .await?
            .dialogs
            .iter()
            .map(|d| d.peer_user())
            .collect();
        peers.sort_unstable();
        Ok((peers == want).then_some(()))
    })
    .await?;
    let mut paged = Vec::new();
    let mut offset = GetDialogsRequest {
        limit: 1,
        ..Default::default()
    };
    loop {
        let page = alice.dialogs().get_dialogs(offset).await?.into_inner();
        let Some(last) = page.dialogs.last() else {
            break;
        };
        paged.push(last.peer_user());
        offset = GetDialogsRequest {
            offset_date: last.top_message_date,
            offset_id: last.top_message_id,
            offset_peer: last.peer,
            limit: 1,
            ..GetDialogsRequest::default()
        };
    }
    paged.sort_unstable();
    assert_eq!(paged, want, "every dialog once, page by page");
    Ok(())
}
