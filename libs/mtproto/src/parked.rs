//! Answers a client has not acknowledged when its connection ends, kept a while by (auth key,
//! session) so that a reconnect of the same session gets them again: a client whose connection
//! broke after the server answered but before the answer arrived would otherwise wait for it
//! for ever (its request's msg_id is a duplicate now, which a server answers only once).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a closed session's unacknowledged answers are kept.
pub const KEPT_FOR: Duration = Duration::from_secs(120);
/// Sessions kept at most; past it the oldest go first.
const MAX_SESSIONS: usize = 10_000;
/// Answers kept per session at most (the newest).
pub const MAX_PER_SESSION: usize = 256;

/// What a session leaves behind: its content count (so seq_no goes on) and its answers.
#[derive(Debug, Clone)]
pub struct Left {
    pub sent_content: i32,
    pub unacked: Vec<Vec<u8>>,
}

#[derive(Default)]
pub struct Parked {
    sessions: Mutex<HashMap<(i64, i64), (Instant, Left)>>,
}

impl Parked {
    /// Keeps what a session left (nothing when it has no unacknowledged answers).
    pub fn park(&self, auth_key_id: i64, session_id: i64, left: Left) {
        if left.unacked.is_empty() {
            return;
        }
        let Ok(mut sessions) = self.sessions.lock() else {
            return;
        };
        let now = Instant::now();
        sessions.retain(|_, (at, _)| now.duration_since(*at) < KEPT_FOR);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| *k)
        {
            sessions.remove(&oldest);
        }
        sessions.insert((auth_key_id, session_id), (now, left));
    }

    /// What a session left, once: the reconnecting session takes it over.
    pub fn take(&self, auth_key_id: i64, session_id: i64) -> Option<Left> {
        let mut sessions = self.sessions.lock().ok()?;
        let (at, left) = sessions.remove(&(auth_key_id, session_id))?;
        (at.elapsed() < KEPT_FOR).then_some(left)
    }

    /// How many sessions are kept (for tests and metrics).
    pub fn len(&self) -> usize {
        self.sessions.lock().map(|s| s.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
