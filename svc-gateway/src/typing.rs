//! SetTyping: what a user is doing in a private chat, told to the peer's online devices as a
//! transient event. The rules: the peer exists and has not blocked the caller; the action is
//! of a known kind; a user sends at most `SET_TYPING_PER_MINUTE` of them per instance; and
//! repeats are coalesced per (sender, peer): the same action is pushed again only after
//! `REPEAT_AFTER`, so a client repeating it every few seconds (as clients do while the user
//! types) causes a bounded number of pushes, while a change of action (CANCEL above all) goes
//! out at once.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use oxigram_errors::{Error, ErrorCode};
use oxigram_proto::{
    gateway::v1::{TransientEvent, transient_event},
    types::v1::{SendMessageAction, UpdateUserTyping, send_message_action},
};
use tonic::Status;

use crate::{
    Gateway,
    auth::SignedIn,
    transient::{TYPING_TIMEOUT, now_ms},
};

/// SetTyping calls one user may make per minute on one gateway instance.
pub const SET_TYPING_PER_MINUTE: u32 = 120;
/// The same action towards the same peer is pushed again only this long after the last push.
pub const REPEAT_AFTER: Duration = Duration::from_secs(3);
/// How long a block (or its absence) found for a (sender, peer) is trusted.
const BLOCK_RECHECK: Duration = Duration::from_secs(5);
/// (sender, peer) pairs kept before the stale ones are forgotten.
const MAX_PAIRS: usize = 100_000;
const WINDOW: Duration = Duration::from_secs(60);

/// What this instance remembers of one (sender, peer).
struct Pair {
    /// The kind last pushed and when.
    pushed: Option<(i32, Instant)>,
    /// Whether the peer blocked the sender, and when that was read.
    blocked: Option<(bool, Instant)>,
    used: Instant,
}

/// Coalescing and limits of SetTyping, per gateway instance.
#[derive(Default)]
pub struct Typing {
    pairs: Mutex<HashMap<(i64, i64), Pair>>,
    /// Per sender: the start of her current window and the calls in it.
    calls: Mutex<HashMap<i64, (Instant, u32)>>,
}

/// The action's kind when it is valid: a known kind, and a progress from 0 to 100 that only
/// the upload kinds carry.
pub fn valid_action(action: Option<&SendMessageAction>) -> Result<i32, Status> {
    use send_message_action::Kind;
    let invalid = |detail: &str| Status::from(Error::new(ErrorCode::SendActionInvalid, detail));
    let action = action.ok_or_else(|| invalid("no action"))?;
    let kind = Kind::try_from(action.kind).map_err(|_| invalid("unknown action kind"))?;
    let uploads = matches!(
        kind,
        Kind::UploadVideo
            | Kind::UploadAudio
            | Kind::UploadPhoto
            | Kind::UploadDocument
            | Kind::UploadRound
    );
    match kind {
        Kind::Unspecified => Err(invalid("no action kind")),
        _ if !(0..=100).contains(&action.progress) => Err(invalid("progress is 0 to 100")),
        _ if action.progress != 0 && !uploads => Err(invalid("only uploads have a progress")),
        _ => Ok(action.kind),
    }
}

impl Typing {
    /// `Ok` when `sender` may make another call now, or the seconds to wait.
    fn admit(&self, sender: i64, now: Instant) -> Result<(), u32> {
        let Ok(mut calls) = self.calls.lock() else {
            return Ok(());
        };
        if calls.len() >= MAX_PAIRS {
            calls.retain(|_, (start, _)| now.duration_since(*start) < WINDOW);
        }
        let (start, count) = calls.entry(sender).or_insert((now, 0));
        if now.duration_since(*start) >= WINDOW {
            *start = now;
            *count = 0;
        }
        *count += 1;
        if *count > SET_TYPING_PER_MINUTE {
            let wait = WINDOW.saturating_sub(now.duration_since(*start));
            return Err((wait.as_secs() as u32).max(1));
        }
        Ok(())
    }

    fn with_pair<T>(&self, key: (i64, i64), now: Instant, f: impl FnOnce(&mut Pair) -> T) -> T {
        let mut fresh = Pair {
            pushed: None,
            blocked: None,
            used: now,
        };
        let Ok(mut pairs) = self.pairs.lock() else {
            return f(&mut fresh);
        };
        if pairs.len() >= MAX_PAIRS {
            pairs.retain(|_, p| now.duration_since(p.used) < WINDOW);
        }
        let pair = pairs.entry(key).or_insert(fresh);
        pair.used = now;
        f(pair)
    }

    /// The block last read for the pair, while it is still trusted.
    fn known_block(&self, key: (i64, i64), now: Instant) -> Option<bool> {
        self.with_pair(key, now, |p| {
            p.blocked
                .filter(|(_, at)| now.duration_since(*at) < BLOCK_RECHECK)
                .map(|(blocked, _)| blocked)
        })
    }

    fn remember_block(&self, key: (i64, i64), blocked: bool, now: Instant) {
        self.with_pair(key, now, |p| p.blocked = Some((blocked, now)));
    }

    /// Whether this action is pushed: a kind other than the last one pushed, or the same
    /// one `REPEAT_AFTER` after its last push. Records the push.
    pub fn should_push(&self, key: (i64, i64), kind: i32, now: Instant) -> bool {
        self.with_pair(key, now, |p| {
            let due = match p.pushed {
                Some((last, at)) => last != kind || now.duration_since(at) >= REPEAT_AFTER,
                None => true,
            };
            if due {
                p.pushed = Some((kind, now));
            }
            due
        })
    }
}

impl Gateway {
    /// SetTyping's rules, then the push (see the module's doc). The call answers after the
    /// push was offered (bounded in time); whether a device showed it is not known.
    pub async fn set_typing(
        &self,
        me: SignedIn,
        peer: Option<&oxigram_proto::types::v1::InputPeer>,
        action: Option<&SendMessageAction>,
    ) -> Result<(), Status> {
        let sender = me.user_id;
        let peer = self.existing_peer(sender, peer).await?;
        let kind = valid_action(action)?;
        let now = Instant::now();
        if let Err(wait) = self.typing.admit(sender, now) {
            return Err(Error::new(ErrorCode::FloodWait(wait), "too many SetTyping calls").into());
        }
        // Saved Messages: nobody else to tell.
        if peer == sender {
            return Ok(());
        }
        let key = (sender, peer);
        let blocked = match self.typing.known_block(key, now) {
            Some(blocked) => blocked,
            None => {
                let blocked = self.blocked_by(sender, &[peer]).await?.contains(&peer);
                self.typing.remember_block(key, blocked, now);
                blocked
            }
        };
        if blocked {
            return Err(Error::new(ErrorCode::UserIsBlocked, "the peer blocked you").into());
        }
        if !self.typing.should_push(key, kind, now) {
            return Ok(());
        }
        let cancel = kind == send_message_action::Kind::Cancel as i32;
        let event = TransientEvent {
            user_id: peer,
            made_at_ms: now_ms(),
            kind: Some(transient_event::Kind::UserTyping(UpdateUserTyping {
                user_id: sender,
                action: action.cloned(),
                timeout_ms: if cancel {
                    0
                } else {
                    TYPING_TIMEOUT.as_millis() as i32
                },
            })),
        };
        self.transient.push(vec![event]).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use oxigram_errors::code_of;
    use send_message_action::Kind;

    use super::*;

    fn action(kind: Kind, progress: i32) -> SendMessageAction {
        SendMessageAction {
            kind: kind as i32,
            progress,
        }
    }

    #[test]
    fn actions_are_checked() {
        let table: [(Option<SendMessageAction>, bool); 9] = [
            (None, false),
            (Some(action(Kind::Unspecified, 0)), false),
            (
                Some(SendMessageAction {
                    kind: 99,
                    progress: 0,
                }),
                false,
            ),
            (Some(action(Kind::Typing, 0)), true),
            (Some(action(Kind::Cancel, 0)), true),
            (Some(action(Kind::Typing, 5)), false),
            (Some(action(Kind::UploadPhoto, 55)), true),
            (Some(action(Kind::UploadDocument, 101)), false),
            (Some(action(Kind::UploadVideo, -1)), false),
        ];
        for (a, ok) in table {
            match valid_action(a.as_ref()) {
                Ok(_) => assert!(ok, "{a:?} passed"),
                Err(status) => {
                    assert!(!ok, "{a:?} refused");
                    assert_eq!(code_of(&status).as_deref(), Some("SEND_ACTION_INVALID"));
                }
            }
        }
    }

    #[test]
    fn repeats_are_coalesced_and_changes_go_out_at_once() {
        let typing = Typing::default();
        let (key, t0) = ((1, 2), Instant::now());
        let (t, cancel) = (Kind::Typing as i32, Kind::Cancel as i32);
        assert!(typing.should_push(key, t, t0));
        // A client repeating every half second: nothing until REPEAT_AFTER.
        let mut pushed = 1;
        for i in 1..=12 {
            if typing.should_push(key, t, t0 + Duration::from_millis(500 * i)) {
                pushed += 1;
            }
        }
        assert_eq!(pushed, 3, "at 0, 3 and 6 s");
        // Another pair is apart.
        assert!(typing.should_push((1, 3), t, t0 + Duration::from_millis(100)));
        // A cancel goes out at once, a typing after it too.
        let later = t0 + Duration::from_millis(6100);
        assert!(typing.should_push(key, cancel, later));
        assert!(typing.should_push(key, t, later + Duration::from_millis(10)));
    }

    #[test]
    fn a_sender_is_limited_per_minute() {
        let typing = Typing::default();
        let t0 = Instant::now();
        for _ in 0..SET_TYPING_PER_MINUTE {
            assert!(typing.admit(5, t0).is_ok());
        }
        let wait = typing.admit(5, t0 + Duration::from_secs(10));
        assert_eq!(wait, Err(50));
        assert!(typing.admit(6, t0).is_ok(), "another sender");
        assert!(typing.admit(5, t0 + WINDOW).is_ok(), "a new window");
    }
}
