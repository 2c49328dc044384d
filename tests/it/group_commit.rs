//! Sends that arrive together share one transaction (group commit) and keep every rule a lone
//! send has: a key repeated within the burst is one message, a key reused with other text is
//! refused, a blocker gets nothing, replies resolve in each owner's ids, and every owner's box
//! ids and pts stay gap-free.

use std::collections::HashSet;

use oxigram_proto::{
    api::v1::{BlockRequest, SendMessageRequest, SendMessageResponse},
    types::v1::InputPeer,
};
use oxigram_tests::{Mode, System, TestClient, client::code};
use tonic::Status;

async fn reply(
    device: &TestClient,
    peer: i64,
    random_id: i64,
    to: i64,
) -> Result<SendMessageResponse, Status> {
    Ok(device
        .messages()
        .send_message(SendMessageRequest {
            peer: Some(InputPeer::user(peer)),
            random_id,
            text: "a reply".into(),
            reply_to_msg_id: to,
            ..Default::default()
        })
        .await?
        .into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_sends_keeps_every_rule() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let [alice, bob, carol] = system
        .users([
            ("15557001", "Alice"),
            ("15557002", "Bob"),
            ("15557003", "Carol"),
        ])
        .await?;
    let (alice_id, bob_id, carol_id) = (alice.user_id()?, bob.user_id()?, carol.user_id()?);
    carol
        .messages()
        .block(BlockRequest { user_id: alice_id })
        .await?;
    let first = alice.send(bob_id, 1, "first").await?;
    let first_id = first.message.as_ref().map_or(0, |m| m.id);

    // One burst: 40 sends each way, a key sent twice, a key reused with other text, a send to
    // a blocker and a reply, all in flight at once.
    let (alice, bob) = (&alice, &bob);
    let mut burst: Vec<_> = Vec::new();
    for i in 0..40 {
        burst.push(
            Box::pin(async move { alice.send(bob_id, 100 + i, &format!("a{i}")).await })
                as std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>>,
        );
        burst.push(Box::pin(async move {
            bob.send(alice_id, 200 + i, &format!("b{i}")).await
        }));
    }
    burst.push(Box::pin(alice.send(bob_id, 500, "twice")));
    burst.push(Box::pin(alice.send(bob_id, 500, "twice")));
    burst.push(Box::pin(alice.send(bob_id, 600, "one text")));
    burst.push(Box::pin(alice.send(bob_id, 600, "another text")));
    burst.push(Box::pin(alice.send(carol_id, 700, "blocked")));
    burst.push(Box::pin(reply(alice, bob_id, 800, first_id)));
    let results = futures::future::join_all(burst).await;

    let (ok, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(|r| r.is_ok());
    let refused: Vec<String> = refused
        .into_iter()
        .filter_map(|r| r.err())
        .map(|s| code(&s).unwrap_or_else(|| s.to_string()))
        .collect();
    assert_eq!(
        refused,
        ["RANDOM_ID_DUPLICATE"],
        "only the reused key is refused"
    );
    let ok: Vec<SendMessageResponse> = ok.into_iter().filter_map(|r| r.ok()).collect();
    let twice: Vec<&SendMessageResponse> = ok
        .iter()
        .filter(|r| r.message.as_ref().is_some_and(|m| m.text == "twice"))
        .collect();
    assert_eq!(twice.len(), 2);
    assert_eq!(
        twice[0].message, twice[1].message,
        "one message for one key"
    );
    assert_eq!(twice[0].pts, twice[1].pts, "and one pts");
    assert!(ok.iter().all(|r| r.pts > 0), "every answer carries its pts");

    // Alice's box: 1 + 40 + 40 received + twice + one of the reused key + blocked + reply.
    let with_bob = alice.history(bob_id).await?;
    let with_carol = alice.history(carol_id).await?;
    assert_eq!(with_carol.len(), 1, "the blocked sender sees her message");
    assert!(
        carol.history(alice_id).await?.is_empty(),
        "the blocker gets no box"
    );
    let mut ids: Vec<i64> = with_bob.iter().chain(&with_carol).map(|m| m.id).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (1..=85).collect::<Vec<_>>(),
        "Alice's ids are gap-free"
    );
    let mut bob_ids: Vec<i64> = bob.history(alice_id).await?.iter().map(|m| m.id).collect();
    bob_ids.sort_unstable();
    assert_eq!(
        bob_ids,
        (1..=84).collect::<Vec<_>>(),
        "Bob's ids are gap-free"
    );

    // The reply names "first" by each owner's own id.
    let bobs_first = bob
        .history(alice_id)
        .await?
        .into_iter()
        .find(|m| m.text == "first")
        .map(|m| m.id);
    let bobs_reply = bob
        .history(alice_id)
        .await?
        .into_iter()
        .find(|m| m.text == "a reply")
        .map(|m| m.reply_to_msg_id);
    assert_eq!(bobs_reply, bobs_first);

    // Every owner's pts run 1..=n, one per message, each message once.
    for (device, n) in [(alice, 85), (bob, 84)] {
        let (slices, state) = device.full_difference(0).await?;
        let pts: Vec<i32> = slices
            .iter()
            .flat_map(|d| d.updates.iter().map(|u| u.pts))
            .collect();
        assert_eq!(pts, (1..=n).collect::<Vec<_>>());
        assert_eq!(state, n);
        let distinct: HashSet<i64> = slices
            .iter()
            .flat_map(|d| d.new_messages.iter().map(|m| m.id))
            .collect();
        assert_eq!(distinct.len(), n as usize);
    }
    Ok(())
}
