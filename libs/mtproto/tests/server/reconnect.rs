//! A call outlives the connection it came on: the client leaves the connection while a slow
//! call runs, comes back in the same session on a new connection and sends the request again
//! under the same msg_id; the call runs once and its answer arrives once on the new connection,
//! whether the call finished before the client came back or after, and whether the server saw
//! the old connection close or it still looks open (a client whose network changed).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use oxigram_mtproto::client::{Client, ClientError, Options};
use oxigram_mtproto::parked::Parked;
use oxigram_mtproto::wire;
use oxigram_tl::{Cursor, Deserializable, Identifiable, Serializable, enums, functions, types};

use crate::{Memory, start_with};

/// Waits (a few seconds at most) until `ready` holds.
async fn until(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..500 {
        if ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Sends a ping and reads everything up to its pong: the results of the answers to
/// `req_msg_id` among it.
async fn through_a_pong(client: &mut Client, req_msg_id: i64) -> Result<Vec<Vec<u8>>, ClientError> {
    let ping_id = client
        .send(functions::Ping { ping_id: 5 }.to_bytes(), true)
        .await?;
    let mut answers = Vec::new();
    loop {
        let message = client.receive_message().await?;
        let body = &message.body;
        match oxigram_tl::constructor_id(body) {
            Some(wire::RPC_RESULT) => {
                if let Some((req, result)) = wire::parse_rpc_result(&body[4..])
                    && req == req_msg_id
                {
                    answers.push(result.to_vec());
                }
            }
            Some(types::Pong::CONSTRUCTOR_ID) => {
                let pong = types::Pong::deserialize(&mut Cursor::from_slice(&body[4..]));
                if pong.is_ok_and(|pong| pong.msg_id == ping_id) {
                    return Ok(answers);
                }
            }
            _ => {}
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Old {
    Closed,
    LeftOpen,
}

#[derive(Debug, Clone, Copy)]
enum Finishes {
    WhileAway,
    AfterComingBack,
}

#[tokio::test]
async fn an_answer_still_running_when_the_connection_drops_arrives_once_on_the_next()
-> Result<(), ClientError> {
    for (old, finishes) in [
        (Old::Closed, Finishes::WhileAway),
        (Old::Closed, Finishes::AfterComingBack),
        (Old::LeftOpen, Finishes::WhileAway),
        (Old::LeftOpen, Finishes::AfterComingBack),
    ] {
        let case = format!("{old:?}, {finishes:?}");
        let parked = Arc::new(Parked::default());
        let (addr, backend) = start_with(parked.clone()).await;
        let mut client = Client::connect(&addr, backend.key.public(), Options::default()).await?;
        // A live session (the salt the server announced taken).
        let enums::NearestDc::Dc(nearest) =
            client.invoke(&functions::help::GetNearestDc {}).await?;
        assert_eq!(nearest.this_dc, 1);

        let request = functions::help::GetInviteText {}.to_bytes();
        let (msg_id, seq_no) = (client.next_msg_id(), client.next_seq_no(true));
        client.send_message(msg_id, seq_no, request.clone()).await?;
        let slow_calls = |backend: &Memory| backend.slow_calls.load(Ordering::SeqCst);
        until("the call runs", || slow_calls(&backend) == 1).await;
        let resumption = client.resumption();
        let (key_id, session_id) = (resumption.key.id(), resumption.session_id);
        let left_open = match old {
            Old::Closed => {
                drop(client);
                until("the server sees the connection end", || !parked.is_empty()).await;
                None
            }
            Old::LeftOpen => Some(client),
        };

        if let Finishes::WhileAway = finishes {
            // Kept for the session, or sent on the old connection and not acknowledged.
            let pending = parked.pending(key_id, session_id).unwrap_or_default();
            backend.gate.add_permits(1);
            until("the answer waits for the session", || {
                parked.pending(key_id, session_id) == Some(pending + 1)
            })
            .await;
        }
        let mut again = Client::resume(&addr, resumption, Options::default()).await?;
        // It never got the answer, so it asks again under the same msg_id. A ping after it
        // proves the server has read it (it answers in order).
        again.send_message(msg_id, seq_no, request).await?;
        let mut answers = through_a_pong(&mut again, msg_id).await?;
        if let Finishes::AfterComingBack = finishes {
            assert!(
                answers.is_empty(),
                "{case}: no answer before the call finishes"
            );
            backend.gate.add_permits(1);
            for _ in 0..500 {
                answers = through_a_pong(&mut again, msg_id).await?;
                if !answers.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        // And nothing more comes for it.
        answers.extend(through_a_pong(&mut again, msg_id).await?);
        assert_eq!(
            answers.len(),
            1,
            "{case}: the answer came {} times",
            answers.len()
        );
        let enums::help::InviteText::Text(text) =
            enums::help::InviteText::deserialize(&mut Cursor::from_slice(&answers[0]))
                .map_err(|e| ClientError::Decode(e.to_string()))?;
        assert_eq!(text.message, "slow", "{case}");
        assert_eq!(slow_calls(&backend), 1, "{case}: the call ran twice");
        drop(left_open);
    }
    Ok(())
}

/// A session served by two connections follows the one last used: when the newer connection
/// closes, the older one, still open and used again, gets its answers.
#[tokio::test]
async fn an_older_connection_of_the_session_gets_its_answers_after_a_newer_one_closed()
-> Result<(), ClientError> {
    let parked = Arc::new(Parked::default());
    let (addr, backend) = start_with(parked.clone()).await;
    let mut older = Client::connect(&addr, backend.key.public(), Options::default()).await?;
    let enums::NearestDc::Dc(nearest) = older.invoke(&functions::help::GetNearestDc {}).await?;
    assert_eq!(nearest.this_dc, 1);
    let (key_id, session_id) = (older.auth_key().id(), older.session_id());

    let mut newer = Client::resume(&addr, older.resumption(), Options::default()).await?;
    let ping = newer
        .send(functions::Ping { ping_id: 1 }.to_bytes(), true)
        .await?;
    newer.answer(ping).await?;
    assert_eq!(parked.connections(key_id, session_id), Some(2));
    drop(newer);
    until("the server sees the newer connection end", || {
        parked.connections(key_id, session_id) == Some(1)
    })
    .await;

    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        older.invoke(&functions::help::GetNearestDc {}),
    )
    .await;
    assert!(
        matches!(answer, Ok(Ok(enums::NearestDc::Dc(ref dc))) if dc.this_dc == 1),
        "{answer:?}"
    );
    Ok(())
}
