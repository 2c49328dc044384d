//! A session's unacknowledged answers outlive its connection: the same auth key and session on
//! a new connection gets them again, with seq_no going on; acknowledged ones are not kept.

use std::sync::Arc;

use oxigram_mtproto::AuthKey;
use oxigram_mtproto::crypto::Direction;
use oxigram_mtproto::envelope::Message;
use oxigram_mtproto::parked::Parked;
use oxigram_mtproto::session::{Session, rpc_result};
use oxigram_mtproto::wire;
use oxigram_tl::{Identifiable, Serializable, types};
use tokio::sync::mpsc;

fn key() -> AuthKey {
    AuthKey::from_bytes([7u8; 256])
}

fn now_msg_id(k: i64) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    (now << 32) + 4 * k
}

/// A client message of session 42 (salt 5, the key's first salt).
fn from_client(msg_id: i64, seq_no: i32, body: Vec<u8>) -> Message {
    Message {
        salt: 5,
        session_id: 42,
        msg_id,
        seq_no,
        body,
    }
}

fn ping(ping_id: i64) -> Vec<u8> {
    let mut body = oxigram_tl::functions::Ping::CONSTRUCTOR_ID
        .to_le_bytes()
        .to_vec();
    body.extend(ping_id.to_bytes());
    body
}

fn ack(ids: Vec<i64>) -> Vec<u8> {
    let mut body = types::MsgsAck::CONSTRUCTOR_ID.to_le_bytes().to_vec();
    body.extend(ids.to_bytes());
    body
}

/// A session that answered one call (the answer sealed, as the connection sends it): the
/// session, the answer's body and the msg_id it went under.
fn answered(parked: &Arc<Parked>, request_msg_id: i64) -> (Session, Vec<u8>, i64) {
    let (push, _rx) = mpsc::unbounded_channel();
    let mut session = Session::new(key(), Some(5), push).with_parking(parked.clone());
    let actions = session.receive(from_client(now_msg_id(1), 1, ping(1)));
    assert!(
        !actions.send.is_empty(),
        "the session answers its first message"
    );
    let answer = rpc_result(request_msg_id, &true.to_bytes());
    let body = answer.body.clone();
    let sealed = session.seal(&answer);
    let sent = Message::decrypt(&key(), Direction::ServerToClient, &sealed);
    let msg_id = sent.map(|m| m.msg_id).unwrap_or_default();
    (session, body, msg_id)
}

#[test]
fn an_unacknowledged_answer_comes_again_on_the_next_connection() {
    let parked = Arc::new(Parked::default());
    let (session, answer, _) = answered(&parked, now_msg_id(2));
    drop(session);
    assert_eq!(parked.len(), 1);

    let (push, _rx) = mpsc::unbounded_channel();
    let mut again = Session::new(key(), None, push).with_parking(parked.clone());
    let actions = again.receive(from_client(now_msg_id(3), 3, ping(2)));
    let bodies: Vec<&Vec<u8>> = actions.send.iter().map(|o| &o.body).collect();
    assert!(bodies.contains(&&answer), "the answer is sent again");
    // A resumed session is no new session.
    assert!(
        !bodies.iter().any(
            |b| oxigram_tl::constructor_id(b) == Some(types::NewSessionCreated::CONSTRUCTOR_ID)
        )
    );
    assert!(parked.is_empty(), "taken over once");
    assert_eq!(oxigram_tl::constructor_id(&answer), Some(wire::RPC_RESULT));
}

#[test]
fn an_acknowledged_answer_is_not_kept() {
    let parked = Arc::new(Parked::default());
    let (mut session, _, msg_id) = answered(&parked, now_msg_id(2));
    assert_ne!(msg_id, 0);
    session.receive(from_client(now_msg_id(3), 2, ack(vec![msg_id])));
    drop(session);
    assert!(parked.is_empty());
}

fn ids_request(constructor: u32, ids: Vec<i64>) -> Vec<u8> {
    let mut body = constructor.to_le_bytes().to_vec();
    body.extend(ids.to_bytes());
    body
}

#[test]
fn a_resend_request_gets_the_unacknowledged_answer() {
    let parked = Arc::new(Parked::default());
    let (mut session, answer, msg_id) = answered(&parked, now_msg_id(2));
    let request = ids_request(types::MsgResendReq::CONSTRUCTOR_ID, vec![msg_id]);
    // A content-related message: odd seq_no.
    let actions = session.receive(from_client(now_msg_id(3), 3, request));
    assert!(
        actions.send.iter().any(|o| o.body == answer),
        "{:?}",
        actions
            .send
            .iter()
            .map(|o| oxigram_tl::constructor_id(&o.body))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_state_request_tells_received_unknown_and_too_old() {
    let parked = Arc::new(Parked::default());
    let (mut session, _, _) = answered(&parked, now_msg_id(2));
    // The ping of `answered` was received; another id was not; one is far too old.
    let too_old = (1i64 << 32) * 1000;
    let request = ids_request(
        types::MsgsStateReq::CONSTRUCTOR_ID,
        vec![now_msg_id(1), now_msg_id(9), too_old],
    );
    let actions = session.receive(from_client(now_msg_id(3), 3, request));
    let info = actions
        .send
        .iter()
        .find(|o| oxigram_tl::constructor_id(&o.body) == Some(types::MsgsStateInfo::CONSTRUCTOR_ID))
        .map(|o| o.body.clone());
    let Some(info) = info else {
        panic!("no msgs_state_info");
    };
    let parsed = <types::MsgsStateInfo as oxigram_tl::Deserializable>::deserialize(
        &mut oxigram_tl::Cursor::from_slice(&info[4..]),
    );
    assert_eq!(parsed.map(|i| i.info).ok(), Some(vec![4, 1, 2]));
}
