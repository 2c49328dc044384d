//! The checks of every incoming message, on a live session over TCP: each broken message gets
//! the `bad_msg_notification` code the protocol gives it, and the session goes on.

use std::time::{SystemTime, UNIX_EPOCH};

use oxigram_mtproto::client::{Client, ClientError, Options};
use oxigram_mtproto::session::bad_msg;
use oxigram_mtproto::wire::{self, Contained};
use oxigram_tl::{Identifiable, Serializable, enums, functions, types};

use crate::start;

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn ping(ping_id: i64) -> Vec<u8> {
    functions::Ping { ping_id }.to_bytes()
}

fn ack(ids: Vec<i64>) -> Vec<u8> {
    let mut body = types::MsgsAck::CONSTRUCTOR_ID.to_le_bytes().to_vec();
    body.extend(ids.to_bytes());
    body
}

/// One row: a good message to send and see answered first, if any; what to send then
/// (msg_id, seq_no, body); and the message the code is about.
struct Row {
    answered_first: Option<(i64, i32, Vec<u8>)>,
    sends: Vec<(i64, i32, Vec<u8>)>,
    bad_msg_id: i64,
}

#[derive(Debug, Clone, Copy)]
enum Broken {
    TimeTooLow,
    TimeTooHigh,
    LowBits,
    ContainerReusesAnEarlierId,
    ContainedReusesTheContainersId,
    TooOldToTell,
    SeqNoTooLow,
    SeqNoTooHigh,
    OddSeqNoOnAnAck,
    EvenSeqNoOnAPing,
    ContainerInAContainer,
    UnreadableContainer,
}

/// Builds a row from the client's own numbering, so that every message but the broken one
/// is one the server accepts.
fn row(broken: Broken, client: &mut Client) -> Row {
    let content = |client: &mut Client| (client.next_msg_id(), client.next_seq_no(true));
    match broken {
        Broken::TimeTooLow => {
            let (_, seq_no) = content(client);
            let id = (now() - 400) << 32;
            single(id, seq_no, ping(1))
        }
        Broken::TimeTooHigh => {
            let (_, seq_no) = content(client);
            let id = (now() + 120) << 32;
            single(id, seq_no, ping(2))
        }
        Broken::LowBits => {
            let (id, seq_no) = content(client);
            single(id | 1, seq_no, ping(3))
        }
        Broken::ContainerReusesAnEarlierId => {
            let (earlier, seq_no) = content(client);
            let (inner, inner_seq_no) = content(client);
            let container = wire::container(&[Contained {
                msg_id: inner,
                seq_no: inner_seq_no,
                body: ping(4),
            }]);
            Row {
                answered_first: Some((earlier, seq_no, ping(5))),
                sends: vec![(earlier, client.next_seq_no(false), container)],
                bad_msg_id: earlier,
            }
        }
        Broken::ContainedReusesTheContainersId => {
            let (_, inner_seq_no) = content(client);
            let id = client.next_msg_id();
            let container = wire::container(&[Contained {
                msg_id: id,
                seq_no: inner_seq_no,
                body: ping(6),
            }]);
            single(id, client.next_seq_no(false), container)
        }
        Broken::TooOldToTell => {
            // An id made before more messages than the server remembers arrived after it.
            let (old, old_seq_no) = content(client);
            let inner: Vec<Contained> = (0..600)
                .map(|n| {
                    let (msg_id, seq_no) = content(client);
                    Contained {
                        msg_id,
                        seq_no,
                        body: ping(100 + n),
                    }
                })
                .collect();
            let container = (
                client.next_msg_id(),
                client.next_seq_no(false),
                wire::container(&inner),
            );
            Row {
                answered_first: None,
                sends: vec![container, (old, old_seq_no, ping(7))],
                bad_msg_id: old,
            }
        }
        Broken::SeqNoTooLow => {
            // A later msg_id than every message so far, with the first seq_no.
            let id = client.next_msg_id();
            single(id, 1, ping(8))
        }
        Broken::SeqNoTooHigh => {
            // Two content messages sent in reverse order: the earlier id claims a seq_no past
            // the later one's.
            let (earlier, _) = content(client);
            let (later, later_seq_no) = content(client);
            Row {
                answered_first: None,
                sends: vec![
                    (later, later_seq_no, ping(9)),
                    (earlier, later_seq_no + 2, ping(10)),
                ],
                bad_msg_id: earlier,
            }
        }
        Broken::OddSeqNoOnAnAck => {
            let (id, seq_no) = content(client);
            single(id, seq_no, ack(vec![1 << 32]))
        }
        Broken::EvenSeqNoOnAPing => {
            let id = client.next_msg_id();
            single(id, client.next_seq_no(false), ping(11))
        }
        Broken::ContainerInAContainer => {
            let (innermost, innermost_seq_no) = content(client);
            let nested_id = client.next_msg_id();
            let nested = wire::container(&[Contained {
                msg_id: innermost,
                seq_no: innermost_seq_no,
                body: ping(12),
            }]);
            let outer = wire::container(&[Contained {
                msg_id: nested_id,
                seq_no: client.next_seq_no(false),
                body: nested,
            }]);
            let outer_id = client.next_msg_id();
            Row {
                answered_first: None,
                sends: vec![(outer_id, client.next_seq_no(false), outer)],
                bad_msg_id: nested_id,
            }
        }
        Broken::UnreadableContainer => {
            let mut body = wire::MSG_CONTAINER.to_le_bytes().to_vec();
            body.extend_from_slice(&5u32.to_le_bytes());
            let id = client.next_msg_id();
            single(id, client.next_seq_no(false), body)
        }
    }
}

fn single(msg_id: i64, seq_no: i32, body: Vec<u8>) -> Row {
    Row {
        answered_first: None,
        sends: vec![(msg_id, seq_no, body)],
        bad_msg_id: msg_id,
    }
}

#[tokio::test]
async fn every_broken_message_gets_its_bad_msg_code_and_the_session_goes_on()
-> Result<(), ClientError> {
    let (addr, backend) = start().await;
    let mut client = Client::connect(&addr, backend.key.public(), Options::default()).await?;
    // A live session: a call made, the salt the server announced taken.
    let enums::NearestDc::Dc(nearest) = client.invoke(&functions::help::GetNearestDc {}).await?;
    assert_eq!(nearest.this_dc, 1);

    let table = [
        (Broken::TimeTooLow, bad_msg::MSG_ID_TOO_LOW),
        (Broken::TimeTooHigh, bad_msg::MSG_ID_TOO_HIGH),
        (Broken::LowBits, bad_msg::MSG_ID_BAD_LOW_BITS),
        (
            Broken::ContainerReusesAnEarlierId,
            bad_msg::CONTAINER_MSG_ID_REUSED,
        ),
        (
            Broken::ContainedReusesTheContainersId,
            bad_msg::CONTAINER_MSG_ID_REUSED,
        ),
        (Broken::TooOldToTell, bad_msg::MSG_TOO_OLD),
        (Broken::SeqNoTooLow, bad_msg::SEQ_NO_TOO_LOW),
        (Broken::SeqNoTooHigh, bad_msg::SEQ_NO_TOO_HIGH),
        (Broken::OddSeqNoOnAnAck, bad_msg::SEQ_NO_EVEN_EXPECTED),
        (Broken::EvenSeqNoOnAPing, bad_msg::SEQ_NO_ODD_EXPECTED),
        (Broken::ContainerInAContainer, bad_msg::BAD_CONTAINER),
        (Broken::UnreadableContainer, bad_msg::BAD_CONTAINER),
    ];
    for (broken, code) in table {
        let row = row(broken, &mut client);
        if let Some((msg_id, seq_no, body)) = row.answered_first {
            client.send_message(msg_id, seq_no, body).await?;
            client.answer(msg_id).await?;
        }
        for (msg_id, seq_no, body) in row.sends {
            client.send_message(msg_id, seq_no, body).await?;
        }
        let answer = client.answer(row.bad_msg_id).await;
        assert!(
            matches!(answer, Err(ClientError::BadMsg(got)) if got == code),
            "{broken:?}: {answer:?}, expected code {code}"
        );
    }

    // Nothing above broke the session: calls and pings still work on it.
    let enums::NearestDc::Dc(nearest) = client.invoke(&functions::help::GetNearestDc {}).await?;
    assert_eq!(nearest.this_dc, 1);
    let msg_id = client.send(ping(99), true).await?;
    let pong = client.answer(msg_id).await?;
    assert_eq!(
        oxigram_tl::constructor_id(&pong),
        Some(types::Pong::CONSTRUCTOR_ID)
    );
    Ok(())
}
