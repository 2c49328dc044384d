//! Search through the gateway: within a dialog and across the caller's dialogs, by sender and
//! page by page, only ever the caller's own messages, an edit's new text at once; and every
//! refusal with its code.

use anyhow::Context;
use oxigram_proto::{
    api::v1::{EditMessageRequest, SearchRequest},
    types::v1::InputPeer,
};
use oxigram_tests::{Mode, System, TestClient, client::code};

/// The ids and texts `device` finds for `request`, newest first, with the next page's key.
async fn found(
    device: &TestClient,
    request: SearchRequest,
) -> anyhow::Result<(Vec<(i64, String)>, i64)> {
    let found = device.messages().search(request).await?.into_inner();
    let messages = found.messages.into_iter().map(|m| (m.id, m.text)).collect();
    Ok((messages, found.next_offset_id))
}

fn texts(found: &[(i64, String)]) -> Vec<&str> {
    found.iter().map(|(_, text)| text.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_the_callers_messages_within_and_across_dialogs() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob, carol] = system
        .users([
            ("15558001", "Alice"),
            ("15558002", "Bob"),
            ("15558003", "Carol"),
        ])
        .await?;
    let (alice_id, bob_id, carol_id) = (alice.user_id()?, bob.user_id()?, carol.user_id()?);
    alice.send(bob_id, 1, "Lunch at noon, Bob?").await?;
    bob.send(alice_id, 2, "LUNCH sounds good").await?;
    alice.send(carol_id, 3, "lunch tomorrow, Carol?").await?;
    carol.send(alice_id, 4, "Sorry, busy at lunchtime").await?;
    bob.send(carol_id, 5, "lunch without Alice").await?;
    alice.send(bob_id, 6, "see you").await?;

    let q = |peer: Option<i64>, q: &str| SearchRequest {
        peer: peer.map(InputPeer::user),
        q: q.into(),
        limit: 100,
        ..Default::default()
    };
    // Across Alice's dialogs, newest first, ignoring case, words and parts of words.
    let (all, next) = found(&alice, q(None, "lunch")).await?;
    assert_eq!(
        texts(&all),
        [
            "Sorry, busy at lunchtime",
            "lunch tomorrow, Carol?",
            "LUNCH sounds good",
            "Lunch at noon, Bob?"
        ]
    );
    assert_eq!(next, 0, "one page holds every match");
    // Within one dialog.
    let (with_bob, _) = found(&alice, q(Some(bob_id), "LUNCH")).await?;
    assert_eq!(
        texts(&with_bob),
        ["LUNCH sounds good", "Lunch at noon, Bob?"]
    );
    // By sender.
    let (from_carol, _) = found(
        &alice,
        SearchRequest {
            from_user_id: carol_id,
            ..q(None, "lunch")
        },
    )
    .await?;
    assert_eq!(texts(&from_carol), ["Sorry, busy at lunchtime"]);
    // Bob's own view: his ids, and never Alice's dialog with Carol.
    let (bobs, _) = found(&bob, q(None, "lunch")).await?;
    assert_eq!(
        texts(&bobs),
        [
            "lunch without Alice",
            "LUNCH sounds good",
            "Lunch at noon, Bob?"
        ]
    );
    let found_by_bob = bob.messages().search(q(None, "lunch")).await?.into_inner();
    let names: Vec<i64> = found_by_bob.users.iter().map(|u| u.id).collect();
    for id in [alice_id, bob_id, carol_id] {
        assert!(names.contains(&id), "users name {id}: {names:?}");
    }

    // Page by page: every match once, newest first.
    let mut pages = Vec::new();
    let mut offset_id = 0;
    loop {
        let (page, next) = found(
            &alice,
            SearchRequest {
                offset_id,
                limit: 3,
                ..q(None, "lunch")
            },
        )
        .await?;
        pages.extend(page);
        if next == 0 {
            break;
        }
        offset_id = next;
    }
    assert_eq!(pages, all);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_is_found_by_its_new_text_at_once() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15558201", "Alice"), ("15558202", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    let sent = alice.send(bob_id, 1, "Lunch at noon?").await?;
    let id = sent.message.context("no message")?.id;
    alice
        .edit_message(EditMessageRequest {
            peer: Some(InputPeer::user(bob_id)),
            id,
            text: "Dinner at eight?".into(),
            ..Default::default()
        })
        .await?;
    let q = |peer: Option<i64>, q: &str| SearchRequest {
        peer: peer.map(InputPeer::user),
        q: q.into(),
        limit: 10,
        ..Default::default()
    };
    for (device, peer) in [(&alice, bob_id), (&bob, alice_id)] {
        let (old, _) = found(device, q(Some(peer), "lunch")).await?;
        assert!(old.is_empty(), "the old text is not found: {old:?}");
        let (new, _) = found(device, q(None, "DINNER")).await?;
        assert_eq!(texts(&new), ["Dinner at eight?"]);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_searches_get_stable_codes() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob] = system
        .users([("15558101", "Alice"), ("15558102", "Bob")])
        .await?;
    let bob_id = bob.user_id()?;
    alice.send(bob_id, 1, "hello there").await?;
    let ok = SearchRequest {
        peer: Some(InputPeer::user(bob_id)),
        q: "hello".into(),
        limit: 10,
        ..Default::default()
    };
    let refused = [
        (
            SearchRequest {
                q: "".into(),
                ..ok.clone()
            },
            "SEARCH_QUERY_EMPTY",
        ),
        (
            SearchRequest {
                q: "  \t ".into(),
                ..ok.clone()
            },
            "SEARCH_QUERY_EMPTY",
        ),
        (
            SearchRequest {
                q: "hi".into(),
                ..ok.clone()
            },
            "SEARCH_QUERY_TOO_SHORT",
        ),
        (
            SearchRequest {
                q: "x".repeat(257),
                ..ok.clone()
            },
            "SEARCH_QUERY_TOO_LONG",
        ),
        (
            SearchRequest {
                q: "hel\0lo".into(),
                ..ok.clone()
            },
            "INPUT_TEXT_INVALID",
        ),
        (
            SearchRequest {
                peer: Some(InputPeer::user(987_654_321)),
                ..ok.clone()
            },
            "PEER_ID_INVALID",
        ),
        (
            SearchRequest {
                peer: Some(InputPeer::user(-1)),
                ..ok.clone()
            },
            "PEER_ID_INVALID",
        ),
        (
            SearchRequest {
                from_user_id: -1,
                ..ok.clone()
            },
            "USER_ID_INVALID",
        ),
        (
            SearchRequest {
                offset_id: -1,
                ..ok.clone()
            },
            "OFFSET_INVALID",
        ),
        (
            SearchRequest {
                min_date: -1,
                ..ok.clone()
            },
            "OFFSET_INVALID",
        ),
        (
            SearchRequest {
                limit: 101,
                ..ok.clone()
            },
            "LIMIT_INVALID",
        ),
        (
            SearchRequest {
                limit: -1,
                ..ok.clone()
            },
            "LIMIT_INVALID",
        ),
    ];
    for (request, expected) in refused {
        let status = alice
            .messages()
            .search(request.clone())
            .await
            .err()
            .with_context(|| format!("{request:?} was accepted"))?;
        assert_eq!(
            code(&status).as_deref(),
            Some(expected),
            "{request:?}: {status:?}"
        );
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    }
    let (hits, _) = found(&alice, ok).await?;
    assert_eq!(texts(&hits), ["hello there"]);
    Ok(())
}
