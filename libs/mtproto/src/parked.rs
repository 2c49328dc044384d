//! A session's state that outlives its connection. A client whose connection broke comes back
//! on a new one with the same auth key and session id, often before the server has noticed
//! that the old connection is dead. There it must find the answers it had not acknowledged,
//! the answers of calls that were still running when the connection broke, and the server's
//! knowledge of which requests it already made: it may send a request again under the same
//! msg_id, which is a duplicate and must not run twice.
//!
//! So a session's state lives here, not in a connection: one [`Shared`] per (auth key,
//! session), which every connection of the session uses and which says which connection the
//! session's answers go to (the one it was last seen on). [`Parked`] finds it by (auth key,
//! session) while the session is live and for [`KEPT_FOR`] after its last connection ended.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc};

use crate::wire;

/// How long a session without a connection is kept.
pub const KEPT_FOR: Duration = Duration::from_secs(120);
/// Sessions without a connection kept at most; past it the oldest go first.
const MAX_SESSIONS: usize = 10_000;
/// Answers kept per session at most (the newest), sent or not.
pub const MAX_PER_SESSION: usize = 256;

/// A call's answer (an `rpc_result`) on its way to its session's connection.
#[derive(Debug)]
pub struct Answer {
    pub auth_key_id: i64,
    pub session_id: i64,
    pub body: Vec<u8>,
    /// The backend refused the call because it no longer knows the key
    /// ([`crate::session::RpcError::unknown_key`]): the connection that gets it closes with a
    /// transport-level `-404` instead of sending `body`, and no later connection gets it.
    pub unknown_key: bool,
}

/// Where a connection takes the answers of the sessions live on it.
pub type AnswerSender = mpsc::UnboundedSender<Answer>;

/// An answer sent and not acknowledged yet.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    /// The server's msg_id it went under (what the client acknowledges).
    pub msg_id: i64,
    /// The request it answers.
    pub req_msg_id: Option<i64>,
    pub body: Vec<u8>,
}

/// What a session's connections share.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Content-related messages sent to the client: the next one's seq_no goes on from it.
    pub sent_content: i32,
    /// Answers sent and not acknowledged, oldest first.
    pub unacked: VecDeque<Sent>,
    /// Answers that found no connection open, for the session's next one.
    pub undelivered: VecDeque<Vec<u8>>,
    /// Requests whose calls are running.
    pub running: HashSet<i64>,
    /// Of those, the ones whose backend call has not returned yet (a request stays running
    /// until its answer is sent): a call made to run after one of them waits.
    pub returning: HashSet<i64>,
    /// The connection the session was last seen on, while it is open: its answers go there.
    connection: Option<u64>,
    answers: Option<AnswerSender>,
    /// How many open connections serve the session (a client may use several, or open a new
    /// one before the server noticed the old one is gone).
    connections: usize,
    /// When its last connection ended.
    left_at: Option<Instant>,
}

impl State {
    /// A request the session made whose answer is running, sent and unacknowledged, or waiting
    /// for the session's next connection: a duplicate, whatever connection it comes on.
    pub fn knows(&self, msg_id: i64) -> bool {
        self.running.contains(&msg_id)
            || self.unacked.iter().any(|s| s.req_msg_id == Some(msg_id))
            || self
                .undelivered
                .iter()
                .any(|body| req_msg_id(body) == Some(msg_id))
    }

    /// An answer the server sent under `msg_id`: its call is over, and it is kept until the
    /// client acknowledges it.
    pub fn sent(&mut self, msg_id: i64, body: &[u8]) {
        let req_msg_id = req_msg_id(body);
        if let Some(req) = req_msg_id {
            self.running.remove(&req);
        }
        self.unacked.push_back(Sent {
            msg_id,
            req_msg_id,
            body: body.to_vec(),
        });
        if self.unacked.len() > MAX_PER_SESSION {
            self.unacked.pop_front();
        }
    }

    /// Everything the client has not got for sure, to send again on a new connection (taken:
    /// sending it again makes it unacknowledged under new msg_ids).
    pub fn take_for_resend(&mut self) -> Vec<Vec<u8>> {
        self.unacked
            .drain(..)
            .map(|s| s.body)
            .chain(self.undelivered.drain(..))
            .collect()
    }

    fn is_empty(&self) -> bool {
        self.unacked.is_empty() && self.undelivered.is_empty() && self.running.is_empty()
    }
}

/// One session's state; see the module's documentation.
#[derive(Debug, Default)]
pub struct Shared {
    state: Mutex<State>,
    /// Told each time a call of the session returns.
    returned: Notify,
}

/// Held while a call runs: when it is dropped, however the call ended, the call counts as
/// returned for the calls waiting for it.
pub struct Returning {
    shared: Arc<Shared>,
    msg_id: i64,
}

impl Drop for Returning {
    fn drop(&mut self) {
        self.shared.lock().returning.remove(&self.msg_id);
        self.shared.returned.notify_waiters();
    }
}

impl Shared {
    /// The call of request `msg_id` runs until the returned guard is dropped.
    pub fn returning(self: &Arc<Self>, msg_id: i64) -> Returning {
        Returning {
            shared: self.clone(),
            msg_id,
        }
    }

    /// Waits until none of `msg_ids` has a call of this session still to return (a request
    /// the session does not know, or whose call returned, is not waited for).
    pub async fn after(&self, msg_ids: &[i64]) {
        loop {
            // Listening before looking, so a call returning in between is not missed.
            let returned = self.returned.notified();
            tokio::pin!(returned);
            returned.as_mut().enable();
            if !msg_ids.iter().any(|id| self.lock().returning.contains(id)) {
                return;
            }
            returned.await;
        }
    }

    /// The session just got a message on `connection`: its answers go there from now on, and
    /// those that found no connection are returned to send there now. A session served by two
    /// connections follows the one last used, so closing the other loses nothing.
    pub(crate) fn seen_on(&self, connection: u64, answers: Option<&AnswerSender>) -> Vec<Vec<u8>> {
        let mut state = self.lock();
        if state.connection == Some(connection) {
            return Vec::new();
        }
        state.connection = Some(connection);
        state.answers = answers.cloned();
        state.undelivered.drain(..).collect()
    }

    /// The state; a panic elsewhere while it was held leaves it as it was, which is still
    /// consistent enough to go on with (every change is a single push or removal).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An answer of this session: to the connection it was last seen on, else kept for its
    /// next one.
    pub fn deliver(&self, answer: Answer) {
        let mut state = self.lock();
        if answer.unknown_key {
            // Never sent as an answer, so never kept: its call is over either way.
            if let Some(req) = req_msg_id(&answer.body) {
                state.running.remove(&req);
            }
            if let Some(to) = &state.answers
                && to.send(answer).is_err()
            {
                state.answers = None;
            }
            return;
        }
        let answer = match &state.answers {
            Some(to) => match to.send(answer) {
                Ok(()) => return,
                Err(unsent) => {
                    state.answers = None;
                    unsent.0
                }
            },
            None => answer,
        };
        if let Some(req) = req_msg_id(&answer.body) {
            state.running.remove(&req);
        }
        state.undelivered.push_back(answer.body);
        if state.undelivered.len() > MAX_PER_SESSION {
            state.undelivered.pop_front();
        }
    }
}

/// The sessions of every connection, by (auth key, session id).
#[derive(Default)]
pub struct Parked {
    sessions: Mutex<Sessions>,
}

#[derive(Default)]
struct Sessions {
    by_id: HashMap<(i64, i64), Arc<Shared>>,
    /// Sessions whose last connection ended, oldest first, with when. An entry is stale once
    /// the session has a connection again or left again later; the sweep skips it then.
    departed: VecDeque<(Instant, (i64, i64))>,
}

impl Sessions {
    /// Forgets sessions without a connection for longer than [`KEPT_FOR`], and the oldest
    /// ones past [`MAX_SESSIONS`].
    fn sweep(&mut self, now: Instant) {
        while let Some(&(at, key)) = self.departed.front() {
            if now.duration_since(at) < KEPT_FOR && self.departed.len() <= MAX_SESSIONS {
                break;
            }
            self.departed.pop_front();
            let still_departed = self
                .by_id
                .get(&key)
                .is_some_and(|shared| shared.lock().left_at == Some(at));
            if still_departed {
                self.by_id.remove(&key);
            }
        }
    }
}

impl Parked {
    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session is live on `connection`, whose answers go to `answers`: its state, and
    /// whether it existed (a session seen before, on this or another connection, is resumed,
    /// not new).
    pub fn attach(
        &self,
        auth_key_id: i64,
        session_id: i64,
        connection: u64,
        answers: Option<AnswerSender>,
    ) -> (Arc<Shared>, bool) {
        let mut sessions = self.sessions();
        sessions.sweep(Instant::now());
        let (shared, existed) = match sessions.by_id.get(&(auth_key_id, session_id)) {
            Some(shared) => (shared.clone(), true),
            None => {
                let shared = Arc::new(Shared::default());
                sessions
                    .by_id
                    .insert((auth_key_id, session_id), shared.clone());
                (shared, false)
            }
        };
        {
            let mut state = shared.lock();
            state.connection = Some(connection);
            state.answers = answers;
            state.connections += 1;
            state.left_at = None;
        }
        (shared, existed)
    }

    /// `connection` no longer serves the session. When no other connection does, the session
    /// is kept for [`KEPT_FOR`] if something of it is pending, and forgotten otherwise.
    pub fn detach(&self, auth_key_id: i64, session_id: i64, connection: u64) {
        let key = (auth_key_id, session_id);
        let mut sessions = self.sessions();
        let Some(shared) = sessions.by_id.get(&key).cloned() else {
            return;
        };
        let mut state = shared.lock();
        state.connections = state.connections.saturating_sub(1);
        if state.connection == Some(connection) {
            // Until another connection of the session is used, its answers wait.
            state.connection = None;
            state.answers = None;
        }
        if state.connections > 0 {
            return;
        }
        if state.is_empty() {
            drop(state);
            sessions.by_id.remove(&key);
            return;
        }
        let now = Instant::now();
        state.left_at = Some(now);
        drop(state);
        sessions.departed.push_back((now, key));
        sessions.sweep(now);
    }

    /// An answer whose connection no longer serves its session: to the session's current
    /// connection, else kept for its next one. A session forgotten meanwhile (destroyed, or
    /// gone longer than [`KEPT_FOR`]) drops it: nobody will ask for it.
    pub fn deliver(&self, answer: Answer) {
        let shared = self
            .sessions()
            .by_id
            .get(&(answer.auth_key_id, answer.session_id))
            .cloned();
        if let Some(shared) = shared {
            shared.deliver(answer);
        }
    }

    /// `destroy_session`: forgets a session without a connection, with whatever it left;
    /// `false` if no such session is known. A session a connection serves is left alone (it
    /// is in use) but counts as known.
    pub fn forget(&self, auth_key_id: i64, session_id: i64) -> bool {
        let key = (auth_key_id, session_id);
        let mut sessions = self.sessions();
        let Some(shared) = sessions.by_id.get(&key) else {
            return false;
        };
        if shared.lock().connections == 0 {
            sessions.by_id.remove(&key);
        }
        true
    }

    /// How many open connections serve a session (`None`: no such session).
    pub fn connections(&self, auth_key_id: i64, session_id: i64) -> Option<usize> {
        let shared = self
            .sessions()
            .by_id
            .get(&(auth_key_id, session_id))
            .cloned()?;
        let connections = shared.lock().connections;
        Some(connections)
    }

    /// How many answers a session has waiting for a connection, unsent or unacknowledged
    /// (`None`: no such session).
    pub fn pending(&self, auth_key_id: i64, session_id: i64) -> Option<usize> {
        let shared = self
            .sessions()
            .by_id
            .get(&(auth_key_id, session_id))
            .cloned()?;
        let state = shared.lock();
        Some(state.unacked.len() + state.undelivered.len())
    }

    /// How many sessions are kept without a connection (for tests and metrics).
    pub fn len(&self) -> usize {
        self.sessions()
            .by_id
            .values()
            .filter(|shared| shared.lock().connections == 0)
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The request an `rpc_result` answers.
fn req_msg_id(body: &[u8]) -> Option<i64> {
    if oxigram_tl::constructor_id(body) != Some(wire::RPC_RESULT) {
        return None;
    }
    body.get(4..)
        .and_then(wire::parse_rpc_result)
        .map(|(req, _)| req)
}
