//! The server side of an encrypted MTProto session: it checks every message (msg_id window,
//! parity, duplicates and age; seq_no parity and order; server salt), answers the service
//! messages itself (`ping`, `ping_delay_disconnect`, `msgs_ack`, `get_future_salts`,
//! `destroy_session`, state and resend requests, `rpc_drop_answer`), opens `msg_container` and
//! `gzip_packed`, strips the invoke wrappers (`invokeWithLayer`, `initConnection`, …, keeping
//! what `invokeAfterMsg(s)` says the call waits for), checks `auth.bindTempAuthKey`, and hands
//! each remaining API call to the [`Backend`], answering with `rpc_result`. What must outlive the connection (answers, running calls, seq_no) is the
//! session's [`Shared`] state (see [`crate::parked`]).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use oxigram_tl::{Cursor, Deserializable, Identifiable, Serializable, functions, types};
use rand::RngCore;
use tokio::sync::mpsc;

use crate::crypto::{AuthKey, Direction, sha256};
use crate::envelope::Message;
use crate::handshake::{NewKey, boxed};
use crate::parked::{AnswerSender, Parked, Shared};
use crate::rsa_key::ServerKey;
use crate::wire::{self, Tail};

/// The transport-level error a client gets for an auth key the server does not know: it
/// makes a new key.
pub const UNKNOWN_KEY_CODE: i32 = -404;

/// An API call's failure as the client sees it: `rpc_error` with Telegram's code and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i32, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }

    /// What a backend answers a call with when it no longer knows the call's auth key (a
    /// temporary key replaced or ended since its connection found it). The client is not sent
    /// an `rpc_error`: it hears what any unknown key gets, a transport-level `-404` that closes
    /// the connection, and makes a new key, as it would on its next connection anyway.
    pub fn unknown_key() -> RpcError {
        RpcError::new(UNKNOWN_KEY_CODE, "AUTH_KEY_UNKNOWN")
    }

    /// See [`RpcError::unknown_key`].
    pub fn is_unknown_key(&self) -> bool {
        self.code == UNKNOWN_KEY_CODE
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        boxed(&types::RpcError {
            error_code: self.code,
            error_message: self.message.clone(),
        })
    }
}

/// A message the connection sends: a pushed update, or an answer from a spawned call.
#[derive(Debug)]
pub struct Outgoing {
    pub body: Vec<u8>,
    /// Content-related messages get odd seq_no and are counted; acks and pongs to
    /// service requests are not.
    pub content_related: bool,
}

/// Where a backend sends pushes for one connection. Dropped senders are harmless.
pub type Pusher = mpsc::UnboundedSender<Outgoing>;

/// What a call knows about who made it.
#[derive(Debug, Clone)]
pub struct Call {
    /// The key the message was encrypted with (a temporary key's id when PFS is used).
    pub auth_key_id: i64,
    pub session_id: i64,
    pub msg_id: i64,
    /// From `invokeWithLayer` (kept for the connection once sent).
    pub layer: Option<i32>,
    /// From `initConnection`.
    pub device_model: Option<String>,
    /// This connection's push channel.
    pub push: Pusher,
    /// Identifies the connection among the server's (see [`Session::on_connection`]): a
    /// backend keeps per-connection state, such as a live update feed, by it.
    pub connection_id: u64,
    /// Earlier requests of the session this call runs after (`invokeAfterMsg`,
    /// `invokeAfterMsgs`): the server calls the backend once their calls have returned.
    pub after: Vec<i64>,
}

/// A key as the backend stores it: the key, and when a temporary key expires.
#[derive(Debug, Clone)]
pub struct StoredKey {
    pub key: AuthKey,
    /// Unix seconds from which a temporary key is unknown (`NewKey::expires_at`, or earlier
    /// once bound); `None` for a permanent key.
    pub expires_at: Option<i64>,
}

impl StoredKey {
    pub fn permanent(key: AuthKey) -> StoredKey {
        StoredKey {
            key,
            expires_at: None,
        }
    }

    /// A temporary key past its expiry, which the server treats as unknown.
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

/// What the protocol needs from the application: keys and API calls.
pub trait Backend: Send + Sync + 'static {
    fn server_key(&self) -> &ServerKey;
    /// A stored key by id (`None` → the client is told `-404` and makes a new one). A temporary
    /// key comes with its expiry: past it, the server treats it as unknown whatever the backend
    /// returns.
    fn find_key(&self, auth_key_id: i64) -> impl Future<Output = Option<StoredKey>> + Send;
    /// Stores a key auth key creation made, a temporary one with its `expires_at`.
    fn save_key(&self, key: &NewKey) -> impl Future<Output = Result<(), String>> + Send;
    /// `auth.bindTempAuthKey`, once the session checked the binding message: the temporary key
    /// acts for the permanent one until `expires_at` (which also ends the temporary key if it is
    /// earlier than its own expiry). A permanent key has one temporary key at a time: binding
    /// another replaces it. A temporary key already bound to another permanent key is
    /// `TEMP_AUTH_KEY_ALREADY_BOUND` (binding it again to the same one is fine). A temporary key
    /// the backend no longer knows is [`RpcError::unknown_key`], which ends the connection with
    /// `-404`.
    fn bind_temp_key(
        &self,
        temp_auth_key_id: i64,
        perm_auth_key_id: i64,
        expires_at: i32,
    ) -> impl Future<Output = Result<(), RpcError>> + Send;
    /// One API call (the unwrapped query, constructor id first); the answer is a serialised
    /// TL object. [`RpcError::unknown_key`] when the call's key is no longer known: the
    /// connection then ends with a transport-level `-404`.
    fn call(
        &self,
        call: Call,
        query: Vec<u8>,
    ) -> impl Future<Output = Result<Vec<u8>, RpcError>> + Send;
}

/// How far a client msg_id's time may be behind or ahead of the server's clock.
const MSG_ID_PAST_SECS: i64 = 300;
const MSG_ID_FUTURE_SECS: i64 = 30;
/// How many recent msg_ids a connection remembers, to drop duplicates and check seq_no order;
/// an older one than all of them gets code 20 (too old to tell).
const SEEN_MSG_IDS: usize = 512;
/// Salts rotate hourly; the current and the previous one are accepted.
const SALT_PERIOD_SECS: i64 = 3600;
/// The most salts one `get_future_salts` answers.
const MAX_FUTURE_SALTS: i32 = 64;

/// bad_msg_notification error codes.
pub mod bad_msg {
    pub const MSG_ID_TOO_LOW: i32 = 16;
    pub const MSG_ID_TOO_HIGH: i32 = 17;
    pub const MSG_ID_BAD_LOW_BITS: i32 = 18;
    pub const CONTAINER_MSG_ID_REUSED: i32 = 19;
    pub const MSG_TOO_OLD: i32 = 20;
    pub const SEQ_NO_TOO_LOW: i32 = 32;
    pub const SEQ_NO_TOO_HIGH: i32 = 33;
    pub const SEQ_NO_EVEN_EXPECTED: i32 = 34;
    pub const SEQ_NO_ODD_EXPECTED: i32 = 35;
    pub const BAD_SERVER_SALT: i32 = 48;
    pub const BAD_CONTAINER: i32 = 64;
}

/// What handling a message asks the connection to do.
#[derive(Debug, Default)]
pub struct Actions {
    /// Send now, in order.
    pub send: Vec<Outgoing>,
    /// Run these calls (msg_id of the request, the call, the query) and deliver their answers
    /// through [`Session::answer_route`].
    pub calls: Vec<(i64, Call, Vec<u8>)>,
    /// Bind a temporary key: (request msg_id, permanent key id); finish with
    /// [`Session::check_bind`] once the permanent key is looked up.
    pub binds: Vec<(i64, i64)>,
    /// `ping_delay_disconnect`: close the connection after this many seconds of silence.
    pub disconnect_after: Option<i32>,
}

/// One connection's view of a session under one auth key.
pub struct Session {
    key: AuthKey,
    session_id: Option<i64>,
    /// The salt auth key creation gave (valid alongside the time-based ones).
    initial_salt: Option<i64>,
    /// The msg_ids this connection received in the session (the newest [`SEEN_MSG_IDS`]).
    seen: BTreeSet<i64>,
    /// Of those, the content-related ones with their seq_no, which grow together.
    content: BTreeMap<i64, i32>,
    /// The highest msg_id forgotten from `seen`: at or below it, a duplicate cannot be told.
    forgotten_up_to: i64,
    last_msg_id: i64,
    layer: Option<i32>,
    device_model: Option<String>,
    push: Pusher,
    connection_id: u64,
    pending_binds: Vec<(i64, functions::auth::BindTempAuthKey)>,
    /// When the key expires, if it is a temporary one (see [`StoredKey`]).
    expires_at: Option<i64>,
    /// The session's state its connections share (this connection's own when there is no
    /// `parked`).
    shared: Arc<Shared>,
    /// Where sessions are found by id, so a session goes on over a new connection.
    parked: Option<Arc<Parked>>,
    /// This connection's way to receive its sessions' answers.
    answers: Option<AnswerSender>,
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Session {
    pub fn new(key: AuthKey, initial_salt: Option<i64>, push: Pusher) -> Session {
        Session {
            key,
            session_id: None,
            initial_salt,
            seen: BTreeSet::new(),
            content: BTreeMap::new(),
            forgotten_up_to: i64::MIN,
            last_msg_id: 0,
            layer: None,
            device_model: None,
            push,
            connection_id: 0,
            pending_binds: Vec::new(),
            expires_at: None,
            shared: Arc::default(),
            parked: None,
            answers: None,
        }
    }

    /// Finds the session's state in `parked` (an earlier connection's, or another open one's)
    /// and leaves it there when this connection ends, so the session goes on elsewhere.
    pub fn with_parking(mut self, parked: Arc<Parked>) -> Session {
        self.parked = Some(parked);
        self
    }

    /// The session's answers reach this connection through `answers` (see
    /// [`Session::answer_route`]).
    pub fn answering_to(mut self, answers: AnswerSender) -> Session {
        self.answers = Some(answers);
        self
    }

    /// The session of connection `connection_id`, which its calls carry.
    pub fn on_connection(mut self, connection_id: u64) -> Session {
        self.connection_id = connection_id;
        self
    }

    /// A session under a temporary key, which ends at `expires_at`.
    pub fn expiring_at(mut self, expires_at: Option<i64>) -> Session {
        self.expires_at = expires_at;
        self
    }

    pub fn key(&self) -> &AuthKey {
        &self.key
    }

    /// The key is temporary and past its expiry: the connection treats it as unknown.
    pub fn expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }

    /// Whether an answer of (`auth_key_id`, `session_id`) is this connection's to send.
    pub fn serves(&self, auth_key_id: i64, session_id: i64) -> bool {
        self.key.id() == auth_key_id && self.session_id == Some(session_id)
    }

    /// Where the answers of the calls in the last [`Actions`] go: to whichever connection the
    /// session is on when they are ready, or kept for its next one.
    pub fn answer_route(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// The server salt of the period containing `time`.
    pub fn salt_at(&self, time: i64) -> i64 {
        let period = time.div_euclid(SALT_PERIOD_SECS);
        let digest = sha256(&[self.key.bytes(), &period.to_le_bytes()]);
        i64::from_le_bytes(std::array::from_fn(|i| digest[i]))
    }

    fn current_salt(&self) -> i64 {
        self.salt_at(unix_now())
    }

    /// The key's first salt, the current period's and the previous one's: a salt is good from
    /// the start of its period until the end of the next (what `get_future_salts` promises).
    fn salt_is_valid_at(&self, salt: i64, now: i64) -> bool {
        Some(salt) == self.initial_salt
            || salt == self.salt_at(now)
            || salt == self.salt_at(now - SALT_PERIOD_SECS)
    }

    /// Handles one decrypted client message.
    pub fn receive(&mut self, message: Message) -> Actions {
        let mut actions = Actions::default();
        if self.session_id != Some(message.session_id) {
            self.start(message.session_id, message.msg_id, &mut actions);
        } else if self.parked.is_some() {
            let waiting = self
                .shared
                .seen_on(self.connection_id, self.answers.as_ref());
            self.send_again(waiting, &mut actions);
        }
        if let Some(code) = msg_id_error(message.msg_id) {
            actions
                .send
                .push(bad_msg(message.msg_id, message.seq_no, code));
            return actions;
        }
        if !self.salt_is_valid_at(message.salt, unix_now()) {
            actions.send.push(Outgoing {
                body: boxed(&types::BadServerSalt {
                    bad_msg_id: message.msg_id,
                    bad_msg_seqno: message.seq_no,
                    error_code: bad_msg::BAD_SERVER_SALT,
                    new_server_salt: self.current_salt(),
                }),
                content_related: false,
            });
            return actions;
        }
        self.dispatch(
            message.msg_id,
            message.seq_no,
            message.body,
            Nesting::default(),
            &mut actions,
        );
        actions
    }

    /// The connection's first message of a session (or the client switched sessions): a
    /// session seen before goes on (what the client has not got for sure comes again, and
    /// seq_no goes on), a new one is announced with `new_session_created`.
    fn start(&mut self, session_id: i64, first_msg_id: i64, actions: &mut Actions) {
        self.leave();
        self.session_id = Some(session_id);
        self.seen.clear();
        self.content.clear();
        self.forgotten_up_to = i64::MIN;
        let (shared, resumed) = match &self.parked {
            Some(parked) => parked.attach(
                self.key.id(),
                session_id,
                self.connection_id,
                self.answers.clone(),
            ),
            None => (Arc::default(), false),
        };
        self.shared = shared;
        if resumed {
            let again = self.shared.lock().take_for_resend();
            self.send_again(again, actions);
            return;
        }
        let mut unique_id = [0u8; 8];
        rand::rng().fill_bytes(&mut unique_id);
        actions.send.push(Outgoing {
            body: boxed(&types::NewSessionCreated {
                first_msg_id,
                unique_id: i64::from_le_bytes(unique_id),
                server_salt: self.current_salt(),
            }),
            content_related: true,
        });
    }

    /// Answers the client may not have got, to send on this connection. Each one's request
    /// counts as received here: sent again under the same msg_id, it is a duplicate even
    /// before the answer is sealed.
    fn send_again(&mut self, answers: Vec<Vec<u8>>, actions: &mut Actions) {
        for body in answers {
            if let Some((req_msg_id, _)) = body.get(4..).and_then(wire::parse_rpc_result) {
                self.remember(req_msg_id, 0, false);
            }
            actions.send.push(Outgoing {
                body,
                content_related: true,
            });
        }
    }

    fn dispatch(
        &mut self,
        msg_id: i64,
        seq_no: i32,
        body: Vec<u8>,
        nesting: Nesting,
        actions: &mut Actions,
    ) {
        let Some(id) = oxigram_tl::constructor_id(&body) else {
            actions
                .send
                .push(bad_msg(msg_id, seq_no, bad_msg::BAD_CONTAINER));
            return;
        };
        let rest = &body[4..];
        if id == wire::GZIP_PACKED {
            // The packed object is the message itself, under the same msg_id and seq_no. A
            // packed gzip_packed is refused: nothing sends one, and it would let a message
            // nest without end.
            match wire::gunzip(rest) {
                Ok(inner) if !nesting.packed => self.dispatch(
                    msg_id,
                    seq_no,
                    inner,
                    Nesting {
                        packed: true,
                        ..nesting
                    },
                    actions,
                ),
                _ => actions.send.push(rpc_error(
                    msg_id,
                    &RpcError::new(400, "INPUT_REQUEST_INVALID"),
                )),
            }
            return;
        }
        if self.seen.contains(&msg_id) || self.shared.lock().knows(msg_id) {
            // A duplicate: the client sent it again (maybe over a new connection); its answer
            // is on its way or already sent. A container must never reuse a msg_id.
            if id == wire::MSG_CONTAINER {
                actions
                    .send
                    .push(bad_msg(msg_id, seq_no, bad_msg::CONTAINER_MSG_ID_REUSED));
            }
            return;
        }
        let content_related = !matches!(id, wire::MSG_CONTAINER | types::MsgsAck::CONSTRUCTOR_ID);
        if let Some(code) = self.order_error(msg_id, seq_no, content_related) {
            actions.send.push(bad_msg(msg_id, seq_no, code));
            return;
        }
        self.remember(msg_id, seq_no, content_related);
        match id {
            wire::MSG_CONTAINER => {
                if nesting.contained {
                    actions
                        .send
                        .push(bad_msg(msg_id, seq_no, bad_msg::BAD_CONTAINER));
                    return;
                }
                match wire::parse_container(rest) {
                    Ok(messages) => {
                        for inner in messages {
                            if let Some(code) = msg_id_error(inner.msg_id) {
                                actions.send.push(bad_msg(inner.msg_id, inner.seq_no, code));
                                continue;
                            }
                            if inner.msg_id == msg_id {
                                actions.send.push(bad_msg(
                                    inner.msg_id,
                                    inner.seq_no,
                                    bad_msg::CONTAINER_MSG_ID_REUSED,
                                ));
                                continue;
                            }
                            let nesting = Nesting {
                                contained: true,
                                packed: false,
                            };
                            self.dispatch(inner.msg_id, inner.seq_no, inner.body, nesting, actions);
                        }
                    }
                    Err(_) => actions
                        .send
                        .push(bad_msg(msg_id, seq_no, bad_msg::BAD_CONTAINER)),
                }
            }
            types::MsgsAck::CONSTRUCTOR_ID => {
                let ids = msg_ids(rest);
                self.shared
                    .lock()
                    .unacked
                    .retain(|sent| !ids.contains(&sent.msg_id));
            }
            functions::Ping::CONSTRUCTOR_ID | functions::PingDelayDisconnect::CONSTRUCTOR_ID => {
                let mut cursor = Cursor::from_slice(rest);
                let Ok(ping_id) = i64::deserialize(&mut cursor) else {
                    actions.send.push(rpc_error(
                        msg_id,
                        &RpcError::new(400, "INPUT_REQUEST_INVALID"),
                    ));
                    return;
                };
                if id == functions::PingDelayDisconnect::CONSTRUCTOR_ID {
                    actions.disconnect_after = i32::deserialize(&mut cursor).ok();
                }
                actions.send.push(Outgoing {
                    body: boxed(&types::Pong { msg_id, ping_id }),
                    content_related: true,
                });
            }
            functions::GetFutureSalts::CONSTRUCTOR_ID => {
                let num = functions::GetFutureSalts::deserialize(&mut Cursor::from_slice(rest))
                    .map(|r| r.num.clamp(1, MAX_FUTURE_SALTS))
                    .unwrap_or(1);
                actions.send.push(Outgoing {
                    body: boxed(&self.future_salts(msg_id, num, unix_now())),
                    content_related: true,
                });
            }
            functions::DestroySession::CONSTRUCTOR_ID => {
                let session_id =
                    functions::DestroySession::deserialize(&mut Cursor::from_slice(rest))
                        .map(|r| r.session_id)
                        .unwrap_or(0);
                // Another session of the same key: what it left (answers, its place in the
                // msg_id and seq_no checks) is forgotten. Destroying the current session is
                // undefined in the protocol; it is left as it is.
                let destroyed = Some(session_id) != self.session_id
                    && self
                        .parked
                        .as_ref()
                        .is_some_and(|p| p.forget(self.key.id(), session_id));
                let answer = if destroyed {
                    boxed(&types::DestroySessionOk { session_id })
                } else {
                    boxed(&types::DestroySessionNone { session_id })
                };
                actions.send.push(rpc_result(msg_id, &answer));
            }
            types::MsgsStateReq::CONSTRUCTOR_ID => {
                let ids = msg_ids(rest);
                let info = ids.iter().map(|id| self.state_of(*id)).collect();
                actions.send.push(Outgoing {
                    body: boxed(&types::MsgsStateInfo {
                        req_msg_id: msg_id,
                        info,
                    }),
                    content_related: false,
                });
            }
            types::MsgResendReq::CONSTRUCTOR_ID => {
                // Answers still unacknowledged go again; of any other message nothing is known.
                let ids = msg_ids(rest);
                let mut unknown = 0;
                let shared = self.shared.lock();
                for id in &ids {
                    match shared.unacked.iter().find(|sent| sent.msg_id == *id) {
                        Some(sent) => actions.send.push(Outgoing {
                            body: sent.body.clone(),
                            content_related: true,
                        }),
                        None => unknown += 1,
                    }
                }
                drop(shared);
                if unknown > 0 {
                    actions.send.push(Outgoing {
                        body: boxed(&types::MsgsStateInfo {
                            req_msg_id: msg_id,
                            info: vec![1; unknown],
                        }),
                        content_related: false,
                    });
                }
            }
            functions::RpcDropAnswer::CONSTRUCTOR_ID => {
                actions.send.push(rpc_result(
                    msg_id,
                    &oxigram_tl::enums::RpcDropAnswer::RpcAnswerUnknown.to_bytes(),
                ));
            }
            types::HttpWait::CONSTRUCTOR_ID => {}
            functions::auth::BindTempAuthKey::CONSTRUCTOR_ID => {
                self.bind_call(msg_id, rest, actions)
            }
            _ => match self.unwrap_invoke(body) {
                // Sent inside the invoke wrappers (a client's first call often is).
                Some((query, _))
                    if oxigram_tl::constructor_id(&query)
                        == Some(functions::auth::BindTempAuthKey::CONSTRUCTOR_ID) =>
                {
                    self.bind_call(msg_id, &query[4..], actions);
                }
                Some((query, mut after)) => {
                    // Only earlier messages: a call waits for no later one (nor itself), so
                    // waits never go round in a circle.
                    after.retain(|earlier| *earlier < msg_id);
                    let call = Call {
                        auth_key_id: self.key.id(),
                        session_id: self.session_id.unwrap_or_default(),
                        msg_id,
                        layer: self.layer,
                        device_model: self.device_model.clone(),
                        push: self.push.clone(),
                        connection_id: self.connection_id,
                        after,
                    };
                    let mut shared = self.shared.lock();
                    shared.running.insert(msg_id);
                    shared.returning.insert(msg_id);
                    drop(shared);
                    actions.calls.push((msg_id, call, query));
                }
                None => actions.send.push(rpc_error(
                    msg_id,
                    &RpcError::new(400, "INPUT_REQUEST_INVALID"),
                )),
            },
        }
    }

    /// The bad_msg_notification code a message earns by its place among the ones received:
    /// too old to tell (20), seq_no of the wrong parity (34, 35), or a content-related message
    /// whose seq_no is out of order with another content-related one's (32: an earlier msg_id
    /// has a seq_no as high or higher; 33: a later msg_id has one as low or lower).
    ///
    /// Order is checked among content-related messages only: their seq_no are odd and unique,
    /// and every client numbers them as it makes their msg_ids. A container or an ack carries
    /// the count so far (even, shared with the content message before it), and clients make a
    /// container's msg_id after those of the messages inside, so holding them to the same order
    /// would refuse stock clients' traffic.
    fn order_error(&self, msg_id: i64, seq_no: i32, content_related: bool) -> Option<i32> {
        if msg_id <= self.forgotten_up_to {
            return Some(bad_msg::MSG_TOO_OLD);
        }
        if content_related != (seq_no & 1 == 1) {
            return Some(if content_related {
                bad_msg::SEQ_NO_ODD_EXPECTED
            } else {
                bad_msg::SEQ_NO_EVEN_EXPECTED
            });
        }
        if !content_related {
            return None;
        }
        let before = self.content.range(..msg_id).next_back();
        if before.is_some_and(|(_, &earlier)| earlier >= seq_no) {
            return Some(bad_msg::SEQ_NO_TOO_LOW);
        }
        let after = self
            .content
            .range((Bound::Excluded(msg_id), Bound::Unbounded))
            .next();
        if after.is_some_and(|(_, &later)| later <= seq_no) {
            return Some(bad_msg::SEQ_NO_TOO_HIGH);
        }
        None
    }

    /// `future_salts` for `num` periods from the current one: each salt is valid from its
    /// period's start to the end of the next period, so consecutive salts overlap by one.
    fn future_salts(&self, req_msg_id: i64, num: i32, now: i64) -> types::FutureSalts {
        let first_period = now.div_euclid(SALT_PERIOD_SECS);
        let salts = (0..i64::from(num))
            .map(|k| {
                let start = (first_period + k) * SALT_PERIOD_SECS;
                types::FutureSalt {
                    valid_since: start as i32,
                    valid_until: (start + 2 * SALT_PERIOD_SECS) as i32,
                    salt: self.salt_at(start),
                }
            })
            .collect();
        types::FutureSalts {
            req_msg_id,
            now: now as i32,
            salts: oxigram_tl::RawVec(salts),
        }
    }

    /// `auth.bindTempAuthKey`'s body (after its constructor id).
    fn bind_call(&mut self, msg_id: i64, rest: &[u8], actions: &mut Actions) {
        match functions::auth::BindTempAuthKey::deserialize(&mut Cursor::from_slice(rest)) {
            Ok(request) => self.bind_request(msg_id, request, actions),
            Err(_) => actions.send.push(rpc_error(
                msg_id,
                &RpcError::new(400, "INPUT_REQUEST_INVALID"),
            )),
        }
    }

    /// Strips `invokeWithLayer`, `initConnection`, `invokeWithoutUpdates` and `invokeAfterMsg(s)`
    /// (recording the layer and device), leaving the call itself and the requests it runs after.
    fn unwrap_invoke(&mut self, mut body: Vec<u8>) -> Option<(Vec<u8>, Vec<i64>)> {
        let mut after = Vec::new();
        loop {
            let id = oxigram_tl::constructor_id(&body)?;
            let mut cursor = Cursor::from_slice(&body[4..]);
            body = match id {
                functions::InvokeWithLayer::<Tail>::CONSTRUCTOR_ID => {
                    let wrapped =
                        functions::InvokeWithLayer::<Tail>::deserialize(&mut cursor).ok()?;
                    self.layer = Some(wrapped.layer);
                    wrapped.query.0
                }
                functions::InitConnection::<Tail>::CONSTRUCTOR_ID => {
                    let wrapped =
                        functions::InitConnection::<Tail>::deserialize(&mut cursor).ok()?;
                    self.device_model = Some(wrapped.device_model);
                    wrapped.query.0
                }
                functions::InvokeWithoutUpdates::<Tail>::CONSTRUCTOR_ID => {
                    functions::InvokeWithoutUpdates::<Tail>::deserialize(&mut cursor)
                        .ok()?
                        .query
                        .0
                }
                functions::InvokeAfterMsg::<Tail>::CONSTRUCTOR_ID => {
                    let wrapped =
                        functions::InvokeAfterMsg::<Tail>::deserialize(&mut cursor).ok()?;
                    after.push(wrapped.msg_id);
                    wrapped.query.0
                }
                functions::InvokeAfterMsgs::<Tail>::CONSTRUCTOR_ID => {
                    let wrapped =
                        functions::InvokeAfterMsgs::<Tail>::deserialize(&mut cursor).ok()?;
                    after.extend(wrapped.msg_ids);
                    wrapped.query.0
                }
                _ => return Some((body, after)),
            };
        }
    }

    /// `auth.bindTempAuthKey`, first half: only a temporary key can be bound
    /// (`TEMP_AUTH_KEY_EMPTY` over a permanent one); the rest waits for the permanent key.
    fn bind_request(
        &mut self,
        msg_id: i64,
        request: functions::auth::BindTempAuthKey,
        actions: &mut Actions,
    ) {
        if self.expires_at.is_none() {
            actions.send.push(rpc_error(
                msg_id,
                &RpcError::new(400, "TEMP_AUTH_KEY_EMPTY"),
            ));
            return;
        }
        actions.binds.push((msg_id, request.perm_auth_key_id));
        self.pending_binds.push((msg_id, request));
    }

    /// Second half of a bind, once the backend looked the permanent key up: the binding message
    /// must be encrypted with that key under MTProto 1.0 (see [`crate::bind`]), be the call's
    /// own message (its msg_id, seq_no 0) and name the call's nonce, permanent key and expiry,
    /// this temporary key and this session. Any mismatch, or a permanent key that is unknown or
    /// itself temporary, is `ENCRYPTED_MESSAGE_INVALID`. Returns the permanent key's id and the
    /// binding's expiry for [`Backend::bind_temp_key`].
    pub fn check_bind(
        &mut self,
        msg_id: i64,
        perm: Option<&StoredKey>,
    ) -> Result<(i64, i32), RpcError> {
        let invalid = || RpcError::new(400, "ENCRYPTED_MESSAGE_INVALID");
        let position = self
            .pending_binds
            .iter()
            .position(|(id, _)| *id == msg_id)
            .ok_or_else(invalid)?;
        let (_, request) = self.pending_binds.swap_remove(position);
        let perm = perm.ok_or_else(invalid)?;
        if perm.expires_at.is_some() || request.perm_auth_key_id != perm.key.id() {
            return Err(invalid());
        }
        let opened =
            crate::bind::decrypt(&perm.key, &request.encrypted_message).map_err(|_| invalid())?;
        let inner = opened.inner;
        if opened.msg_id != msg_id
            || opened.seq_no != 0
            || inner.nonce != request.nonce
            || inner.temp_auth_key_id != self.key.id()
            || inner.perm_auth_key_id != request.perm_auth_key_id
            || Some(inner.temp_session_id) != self.session_id
            || inner.expires_at != request.expires_at
        {
            return Err(invalid());
        }
        Ok((perm.key.id(), request.expires_at))
    }

    /// The backend bound this temporary key until `expires_at`: it ends then, if not sooner.
    pub fn bound_until(&mut self, expires_at: i32) {
        let until = i64::from(expires_at);
        self.expires_at = Some(self.expires_at.map_or(until, |at| at.min(until)));
    }

    /// Encrypts an outgoing message for the current session.
    pub fn seal(&mut self, outgoing: &Outgoing) -> Vec<u8> {
        let msg_id = self.next_msg_id();
        let mut shared = self.shared.lock();
        let seq_no = if outgoing.content_related {
            shared.sent_content += 1;
            shared.sent_content * 2 - 1
        } else {
            shared.sent_content * 2
        };
        if outgoing.content_related && is_answer(&outgoing.body) {
            shared.sent(msg_id, &outgoing.body);
        }
        drop(shared);
        let message = Message {
            salt: self.current_salt(),
            session_id: self.session_id.unwrap_or_default(),
            msg_id,
            seq_no,
            body: outgoing.body.clone(),
        };
        message.encrypt(&self.key, Direction::ServerToClient)
    }

    /// Server msg_ids: unix time in the high half, ≡ 1 (mod 4), strictly increasing.
    fn next_msg_id(&mut self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let candidate = ((now.as_secs() as i64) << 32)
            | ((i64::from(now.subsec_nanos()) << 2) & 0xffff_fffc)
            | 1;
        self.last_msg_id = if candidate > self.last_msg_id {
            candidate
        } else {
            self.last_msg_id + 4
        };
        self.last_msg_id
    }

    /// Records a message that passed the checks; past [`SEEN_MSG_IDS`] the oldest is forgotten.
    fn remember(&mut self, msg_id: i64, seq_no: i32, content_related: bool) {
        self.seen.insert(msg_id);
        if content_related {
            self.content.insert(msg_id, seq_no);
        }
        if self.seen.len() > SEEN_MSG_IDS
            && let Some(oldest) = self.seen.pop_first()
        {
            self.content.remove(&oldest);
            self.forgotten_up_to = self.forgotten_up_to.max(oldest);
        }
    }
}

impl Session {
    /// What the server knows of a client message (msgs_state_info): 2 or 3 for a msg_id too
    /// low or too high to have been taken, 4 for one received (its answer, if any, is sent or
    /// on its way), 1 for nothing known.
    fn state_of(&self, msg_id: i64) -> u8 {
        match msg_id_error(msg_id) {
            Some(bad_msg::MSG_ID_TOO_LOW) => 2,
            Some(bad_msg::MSG_ID_TOO_HIGH) => 3,
            _ if self.seen.contains(&msg_id) || self.shared.lock().knows(msg_id) => 4,
            _ => 1,
        }
    }

    /// This connection no longer serves the current session (it ends or changes): the
    /// session's state stays in `parked` for its next connection.
    fn leave(&mut self) {
        if let (Some(parked), Some(session_id)) = (&self.parked, self.session_id) {
            parked.detach(self.key.id(), session_id, self.connection_id);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Where a message sits: inside a container, inside a `gzip_packed`.
#[derive(Debug, Clone, Copy, Default)]
struct Nesting {
    contained: bool,
    packed: bool,
}

/// The msg_ids of an ack, state or resend request (a boxed vector; a bare one is accepted).
fn msg_ids(rest: &[u8]) -> Vec<i64> {
    Vec::<i64>::deserialize(&mut Cursor::from_slice(rest))
        .or_else(|_| {
            oxigram_tl::RawVec::<i64>::deserialize(&mut Cursor::from_slice(rest)).map(|v| v.0)
        })
        .unwrap_or_default()
}

/// An `rpc_result`: what a client waits for and must get again after a reconnect.
fn is_answer(body: &[u8]) -> bool {
    oxigram_tl::constructor_id(body) == Some(wire::RPC_RESULT)
}

/// The bad_msg_notification code a client msg_id earns, if any.
fn msg_id_error(msg_id: i64) -> Option<i32> {
    if msg_id & 3 != 0 {
        return Some(bad_msg::MSG_ID_BAD_LOW_BITS);
    }
    let sent = msg_id >> 32;
    let now = unix_now();
    if sent < now - MSG_ID_PAST_SECS {
        return Some(bad_msg::MSG_ID_TOO_LOW);
    }
    if sent > now + MSG_ID_FUTURE_SECS {
        return Some(bad_msg::MSG_ID_TOO_HIGH);
    }
    None
}

fn bad_msg(msg_id: i64, seq_no: i32, code: i32) -> Outgoing {
    Outgoing {
        body: boxed(&types::BadMsgNotification {
            bad_msg_id: msg_id,
            bad_msg_seqno: seq_no,
            error_code: code,
        }),
        content_related: false,
    }
}

/// `rpc_result` carrying `answer` (gzip-packed when that pays).
pub fn rpc_result(req_msg_id: i64, answer: &[u8]) -> Outgoing {
    let body = if answer.len() > 1024 {
        let packed = wire::gzip(answer);
        if packed.len() < answer.len() {
            wire::rpc_result(req_msg_id, &packed)
        } else {
            wire::rpc_result(req_msg_id, answer)
        }
    } else {
        wire::rpc_result(req_msg_id, answer)
    };
    Outgoing {
        body,
        content_related: true,
    }
}

pub fn rpc_error(req_msg_id: i64, error: &RpcError) -> Outgoing {
    Outgoing {
        body: wire::rpc_result(req_msg_id, &error.to_bytes()),
        content_related: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parked::Answer;
    use crate::wire::Contained;

    fn key() -> AuthKey {
        AuthKey::from_bytes(std::array::from_fn(|i| (i * 7 + 1) as u8))
    }

    fn session() -> Session {
        let (push, _) = mpsc::unbounded_channel();
        Session::new(key(), Some(5), push)
    }

    /// Client msg_ids of this second: `base + 4k`, in the order they are made.
    fn base() -> i64 {
        unix_now() << 32
    }

    /// A message of session 42 under the key's first salt.
    fn message(msg_id: i64, seq_no: i32, body: Vec<u8>) -> Message {
        in_session(42, msg_id, seq_no, body)
    }

    fn in_session(session_id: i64, msg_id: i64, seq_no: i32, body: Vec<u8>) -> Message {
        Message {
            salt: 5,
            session_id,
            msg_id,
            seq_no,
            body,
        }
    }

    fn ping(ping_id: i64) -> Vec<u8> {
        functions::Ping { ping_id }.to_bytes()
    }

    fn read<T: Deserializable>(body: &[u8]) -> T {
        T::deserialize(&mut Cursor::from_slice(&body[4..])).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The bodies sent with constructor `id`.
    fn sent(actions: &Actions, id: u32) -> Vec<Vec<u8>> {
        actions
            .send
            .iter()
            .filter(|o| oxigram_tl::constructor_id(&o.body) == Some(id))
            .map(|o| o.body.clone())
            .collect()
    }

    /// The results of the `rpc_result`s sent, by request.
    fn results(actions: &Actions) -> Vec<(i64, Vec<u8>)> {
        sent(actions, wire::RPC_RESULT)
            .iter()
            .filter_map(|body| wire::parse_rpc_result(&body[4..]))
            .map(|(req, result)| (req, result.to_vec()))
            .collect()
    }

    fn bad_msgs(actions: &Actions) -> Vec<(i64, i32)> {
        sent(actions, types::BadMsgNotification::CONSTRUCTOR_ID)
            .iter()
            .map(|body| read::<types::BadMsgNotification>(body))
            .map(|bad| (bad.bad_msg_id, bad.error_code))
            .collect()
    }

    #[test]
    fn a_new_session_is_announced_with_its_first_msg_id_and_the_server_salt() {
        let mut session = session();
        let first = base() + 4;
        let actions = session.receive(message(first, 1, ping(1)));
        let ids: Vec<_> = actions
            .send
            .iter()
            .map(|o| oxigram_tl::constructor_id(&o.body))
            .collect();
        assert_eq!(
            ids,
            [
                Some(types::NewSessionCreated::CONSTRUCTOR_ID),
                Some(types::Pong::CONSTRUCTOR_ID)
            ]
        );
        let created: types::NewSessionCreated = read(&actions.send[0].body);
        assert_eq!(created.first_msg_id, first);
        // The salt the client is to use from now: the current period's, not the first salt.
        assert_ne!(created.server_salt, 5);
        assert!(session.salt_is_valid_at(created.server_salt, unix_now()));

        // Later messages of the session announce nothing; another session is announced again.
        let actions = session.receive(message(first + 4, 3, ping(2)));
        assert!(sent(&actions, types::NewSessionCreated::CONSTRUCTOR_ID).is_empty());
        let actions = session.receive(in_session(43, first + 8, 1, ping(3)));
        let created = sent(&actions, types::NewSessionCreated::CONSTRUCTOR_ID);
        assert_eq!(created.len(), 1);
        assert_eq!(
            read::<types::NewSessionCreated>(&created[0]).first_msg_id,
            first + 8
        );
    }

    #[test]
    fn ping_is_answered_with_pong() {
        let mut session = session();
        let id = base() + 4;
        let actions = session.receive(message(id, 1, ping(77)));
        let pongs = sent(&actions, types::Pong::CONSTRUCTOR_ID);
        let pong: types::Pong = read(&pongs[0]);
        assert_eq!((pong.msg_id, pong.ping_id), (id, 77));
        assert_eq!(actions.disconnect_after, None);

        let delayed = functions::PingDelayDisconnect {
            ping_id: 78,
            disconnect_delay: 35,
        }
        .to_bytes();
        let actions = session.receive(message(id + 4, 3, delayed));
        let pong: types::Pong = read(&sent(&actions, types::Pong::CONSTRUCTOR_ID)[0]);
        assert_eq!((pong.msg_id, pong.ping_id), (id + 4, 78));
        assert_eq!(actions.disconnect_after, Some(35));

        // A ping without its id is a bad request, not a pong.
        let truncated = functions::Ping::CONSTRUCTOR_ID.to_le_bytes().to_vec();
        let actions = session.receive(message(id + 8, 5, truncated));
        assert!(sent(&actions, types::Pong::CONSTRUCTOR_ID).is_empty());
        assert_eq!(results(&actions).len(), 1);
    }

    #[test]
    fn future_salts_are_consecutive_and_each_is_accepted_while_valid() {
        let mut session = session();
        let id = base() + 4;
        let request = functions::GetFutureSalts { num: 3 }.to_bytes();
        let actions = session.receive(message(id, 1, request));
        // future_salts comes as it is, not in an rpc_result.
        let answers = sent(&actions, types::FutureSalts::CONSTRUCTOR_ID);
        assert_eq!(answers.len(), 1);
        let salts: types::FutureSalts = read(&answers[0]);
        let now = unix_now();
        assert_eq!(salts.req_msg_id, id);
        assert!((i64::from(salts.now) - now).abs() <= 1);
        let salts = salts.salts.0;
        assert_eq!(salts.len(), 3);
        let (since, until) = (
            i64::from(salts[0].valid_since),
            i64::from(salts[0].valid_until),
        );
        assert!(since <= now && now < until, "the first is valid now");
        for (k, salt) in salts.iter().enumerate() {
            let since = i64::from(salt.valid_since);
            let until = i64::from(salt.valid_until);
            assert_eq!(since, i64::from(salts[0].valid_since) + 3600 * k as i64);
            assert_eq!(until, since + 7200, "consecutive salts overlap by a period");
            assert!(
                session.salt_is_valid_at(salt.salt, since),
                "{k} at its start"
            );
            assert!(
                session.salt_is_valid_at(salt.salt, until - 1),
                "{k} at its end"
            );
            assert!(
                !session.salt_is_valid_at(salt.salt, until),
                "{k} after its end"
            );
        }
        assert!(salts[0].salt != salts[1].salt && salts[1].salt != salts[2].salt);

        // The server takes the current one now, and not one that is not valid yet.
        let mut with_salt = message(id + 4, 3, ping(1));
        with_salt.salt = salts[0].salt;
        let actions = session.receive(with_salt);
        assert_eq!(sent(&actions, types::Pong::CONSTRUCTOR_ID).len(), 1);
        let mut early = message(id + 8, 5, ping(2));
        early.salt = salts[2].salt;
        let actions = session.receive(early);
        let bad = sent(&actions, types::BadServerSalt::CONSTRUCTOR_ID);
        assert_eq!(bad.len(), 1);
        let bad: types::BadServerSalt = read(&bad[0]);
        assert!(session.salt_is_valid_at(bad.new_server_salt, unix_now()));

        // The count is kept between 1 and 64.
        for (num, expected) in [(0, 1), (1000, 64)] {
            let request = functions::GetFutureSalts { num }.to_bytes();
            let n = 12 + 4 * i64::from(expected);
            let actions = session.receive(message(id + n, 5 + 2 * expected, request));
            let answer = sent(&actions, types::FutureSalts::CONSTRUCTOR_ID);
            assert_eq!(
                read::<types::FutureSalts>(&answer[0]).salts.0.len(),
                expected as usize
            );
        }
    }

    #[test]
    fn destroy_session_forgets_another_sessions_answers() {
        let parked = Arc::new(Parked::default());
        let (push, _) = mpsc::unbounded_channel();
        let id = base();
        // Session 42 ends with an answer the client never acknowledged.
        let mut old = Session::new(key(), Some(5), push.clone()).with_parking(parked.clone());
        old.receive(message(id + 4, 1, ping(1)));
        let answer = rpc_result(id + 8, &true.to_bytes());
        old.seal(&answer);
        drop(old);
        assert_eq!(parked.pending(key().id(), 42), Some(1));

        let mut current = Session::new(key(), Some(5), push.clone()).with_parking(parked.clone());
        let destroy = |session_id| functions::DestroySession { session_id }.to_bytes();
        let table = [
            ("the ended session", 42, true),
            ("it again", 42, false),
            ("the current session", 7, false),
            ("a session never seen", 1234, false),
        ];
        for (n, (name, session_id, ok)) in table.into_iter().enumerate() {
            let msg_id = id + 12 + 4 * n as i64;
            let actions =
                current.receive(in_session(7, msg_id, 1 + 2 * n as i32, destroy(session_id)));
            let results = results(&actions);
            assert_eq!(results.len(), 1, "{name}");
            assert_eq!(results[0].0, msg_id, "{name}");
            let expected = if ok {
                boxed(&types::DestroySessionOk { session_id })
            } else {
                boxed(&types::DestroySessionNone { session_id })
            };
            assert_eq!(results[0].1, expected, "{name}");
        }
        assert_eq!(parked.pending(key().id(), 42), None);
        assert!(parked.is_empty());

        // Session 42 comes back as a new session, without the forgotten answer.
        let mut back = Session::new(key(), Some(5), push).with_parking(parked.clone());
        let actions = back.receive(message(id + 40, 3, ping(2)));
        assert_eq!(
            sent(&actions, types::NewSessionCreated::CONSTRUCTOR_ID).len(),
            1
        );
        assert!(!actions.send.iter().any(|o| o.body == answer.body));
    }

    #[test]
    fn a_container_of_two_requests_is_answered_both() {
        let parked = Arc::new(Parked::default());
        let (push, _) = mpsc::unbounded_channel();
        let (answers, mut answered) = mpsc::unbounded_channel();
        let mut session = Session::new(key(), Some(5), push)
            .with_parking(parked)
            .answering_to(answers);
        let id = base();
        let first = functions::help::GetNearestDc {}.to_bytes();
        let second = functions::help::GetConfig {}.to_bytes();
        // As stock clients make it: the messages' ids and seq_no first, then the container's.
        let container = wire::container(&[
            Contained {
                msg_id: id + 4,
                seq_no: 1,
                body: first.clone(),
            },
            Contained {
                msg_id: id + 8,
                seq_no: 3,
                body: second.clone(),
            },
            Contained {
                msg_id: id + 12,
                seq_no: 5,
                body: ping(9),
            },
        ]);
        let actions = session.receive(message(id + 16, 6, container));
        assert!(bad_msgs(&actions).is_empty());
        let calls: Vec<(i64, i64, Vec<u8>)> = actions
            .calls
            .iter()
            .map(|(msg_id, call, query)| (*msg_id, call.msg_id, query.clone()))
            .collect();
        assert_eq!(calls, [(id + 4, id + 4, first), (id + 8, id + 8, second)]);
        let pong: types::Pong = read(&sent(&actions, types::Pong::CONSTRUCTOR_ID)[0]);
        assert_eq!(pong.msg_id, id + 12);

        // Both answers come back to the connection (in the order they finish) and are sent.
        let route = session.answer_route();
        for req in [id + 8, id + 4] {
            route.deliver(Answer {
                auth_key_id: key().id(),
                session_id: 42,
                body: rpc_result(req, &true.to_bytes()).body,
                unknown_key: false,
            });
        }
        let mut answered_to = Vec::new();
        while let Ok(answer) = answered.try_recv() {
            assert!(session.serves(answer.auth_key_id, answer.session_id));
            let (req, _) = wire::parse_rpc_result(&answer.body[4..]).unwrap_or_default();
            answered_to.push(req);
            session.seal(&Outgoing {
                body: answer.body,
                content_related: true,
            });
        }
        assert_eq!(answered_to, [id + 8, id + 4]);
        assert!(session.shared.lock().running.is_empty());
    }

    #[test]
    fn a_gzip_packed_request_is_the_request_itself() {
        let mut session = session();
        let id = base();
        let actions = session.receive(message(id + 4, 1, wire::gzip(&ping(5))));
        let pong: types::Pong = read(&sent(&actions, types::Pong::CONSTRUCTOR_ID)[0]);
        assert_eq!((pong.msg_id, pong.ping_id), (id + 4, 5));

        let call = functions::help::GetNearestDc {}.to_bytes();
        let actions = session.receive(message(id + 8, 3, wire::gzip(&call)));
        assert_eq!(actions.calls.len(), 1);
        assert_eq!((actions.calls[0].0, &actions.calls[0].2), (id + 8, &call));
        // The same message again, packed or not, is a duplicate.
        assert!(session.receive(message(id + 8, 3, call)).calls.is_empty());

        // Inside a container too.
        let container = wire::container(&[Contained {
            msg_id: id + 12,
            seq_no: 5,
            body: wire::gzip(&ping(6)),
        }]);
        let actions = session.receive(message(id + 16, 6, container));
        assert_eq!(sent(&actions, types::Pong::CONSTRUCTOR_ID).len(), 1);

        // Packed twice, or not gzip at all: a bad request, answered as one.
        let mut not_gzip = wire::GZIP_PACKED.to_le_bytes().to_vec();
        not_gzip.extend(vec![1u8, 2, 3].to_bytes());
        for (n, body) in [wire::gzip(&wire::gzip(&ping(7))), not_gzip]
            .into_iter()
            .enumerate()
        {
            let msg_id = id + 20 + 4 * n as i64;
            let actions = session.receive(message(msg_id, 7 + 2 * n as i32, body));
            assert!(sent(&actions, types::Pong::CONSTRUCTOR_ID).is_empty());
            let results = results(&actions);
            let error: types::RpcError = read(&results[0].1);
            assert_eq!(
                (results[0].0, error.error_message.as_str()),
                (msg_id, "INPUT_REQUEST_INVALID")
            );
        }
    }

    #[test]
    fn a_bind_inside_the_invoke_wrappers_is_a_bind() {
        let bind = functions::auth::BindTempAuthKey {
            perm_auth_key_id: 99,
            nonce: 1,
            expires_at: 2,
            encrypted_message: vec![0; 96],
        };
        let wrapped = functions::InvokeWithLayer {
            layer: oxigram_tl::LAYER,
            query: functions::InitConnection {
                api_id: 1,
                device_model: "test".into(),
                system_version: String::new(),
                app_version: String::new(),
                system_lang_code: String::new(),
                lang_pack: String::new(),
                lang_code: String::new(),
                proxy: None,
                params: None,
                query: Tail(bind.to_bytes()),
            },
        }
        .to_bytes();
        let id = base() + 4;
        let mut temporary = session().expiring_at(Some(unix_now() + 3600));
        let actions = temporary.receive(message(id, 1, wrapped.clone()));
        assert_eq!(actions.binds, [(id, 99)]);
        assert!(actions.calls.is_empty());

        // Over a permanent key it is refused at once.
        let actions = session().receive(message(id, 1, wrapped));
        assert!(actions.binds.is_empty());
        let results = results(&actions);
        let error: types::RpcError = read(&results[0].1);
        assert_eq!(error.error_message, "TEMP_AUTH_KEY_EMPTY");
    }

    /// A stock client's numbering: content messages odd and counted in msg_id order; acks and
    /// containers even, a container's id made after the messages inside; an ack inside a
    /// container with the count so far. None of it is refused.
    #[test]
    fn stock_client_numbering_is_accepted() {
        let mut session = session();
        let id = base();
        let ack = |ids: Vec<i64>| {
            let mut body = types::MsgsAck::CONSTRUCTOR_ID.to_le_bytes().to_vec();
            body.extend(ids.to_bytes());
            body
        };
        let traffic = [
            message(id + 4, 1, ping(1)),
            message(id + 8, 2, ack(vec![1])),
            message(
                id + 24,
                6,
                wire::container(&[
                    Contained {
                        msg_id: id + 12,
                        seq_no: 2,
                        body: ack(vec![2]),
                    },
                    Contained {
                        msg_id: id + 16,
                        seq_no: 3,
                        body: ping(2),
                    },
                    Contained {
                        msg_id: id + 20,
                        seq_no: 5,
                        body: wire::gzip(&ping(3)),
                    },
                ]),
            ),
            message(id + 28, 7, ping(4)),
            message(id + 32, 8, ack(vec![3])),
        ];
        let mut pongs = 0;
        for message in traffic {
            let actions = session.receive(message);
            assert!(bad_msgs(&actions).is_empty(), "{:?}", bad_msgs(&actions));
            pongs += sent(&actions, types::Pong::CONSTRUCTOR_ID).len();
        }
        assert_eq!(pongs, 4);
    }
}
