//! This device's sends awaiting their message (the "pending bubbles" of a chat screen).
//!
//! A send's message reaches the device that sent it by the send's answer, or, when that answer
//! was lost (a timeout, a dropped connection, a restart), by the sender's own new-message
//! update, on the stream or in getDifference: the update log gives the sender's update the
//! send's `random_id` ([`echo`]), and the answer carries it too. [`PendingSends`] settles a
//! pending send by whichever comes first, once, so the device replaces its bubble with the
//! message instead of showing the message twice. The recipient's update has `random_id` 0 and
//! settles nothing.

use std::collections::HashMap;

use oxigram_proto::{
    api::v1::SendMessageResponse,
    types::v1::{Message, PtsUpdate, update},
};

/// The `random_id` and message of a new-message update that is its sender's own (the only
/// kind that names a `random_id`); `None` for any other update.
pub fn echo(update: &PtsUpdate) -> Option<(i64, &Message)> {
    match update.update.as_ref()?.kind.as_ref()? {
        update::Kind::NewMessage(n) if n.random_id != 0 => Some((n.random_id, n.message.as_ref()?)),
        _ => None,
    }
}

/// Sends waiting for their message, each by its `random_id`, with what the application keeps
/// for it (`T`: a bubble, a local id).
#[derive(Debug)]
pub struct PendingSends<T> {
    waiting: HashMap<i64, T>,
}

impl<T> Default for PendingSends<T> {
    fn default() -> Self {
        Self {
            waiting: HashMap::new(),
        }
    }
}

impl<T> PendingSends<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A send about to go out (or retried: the same `random_id` replaces what was kept).
    pub fn add(&mut self, random_id: i64, pending: T) {
        self.waiting.insert(random_id, pending);
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Whether a send with this `random_id` still waits.
    pub fn contains(&self, random_id: i64) -> bool {
        self.waiting.contains_key(&random_id)
    }

    /// The send's answer arrived: what was kept for it and its message, unless an update
    /// settled it first.
    pub fn answered(&mut self, response: &SendMessageResponse) -> Option<(T, Message)> {
        let message = response.message.clone()?;
        Some((self.waiting.remove(&response.random_id)?, message))
    }

    /// An update the device applied (from any source): the send it settles, if it is the
    /// sender's own new message of a send still waiting, with the message.
    pub fn settle(&mut self, update: &PtsUpdate) -> Option<(T, Message)> {
        let (random_id, message) = echo(update)?;
        Some((self.waiting.remove(&random_id)?, message.clone()))
    }
}

#[cfg(test)]
mod tests {
    use oxigram_proto::types::v1::{Update, UpdateNewMessage};

    use super::*;

    fn new_message(id: i64, random_id: i64) -> PtsUpdate {
        PtsUpdate {
            pts: 1,
            pts_count: 1,
            date: 0,
            update: Some(Update {
                kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                    message: Some(Message {
                        id,
                        ..Default::default()
                    }),
                    random_id,
                })),
            }),
        }
    }

    #[test]
    fn a_send_settles_once_by_answer_or_update() {
        let mut pending = PendingSends::new();
        pending.add(7, "bubble 7");
        pending.add(8, "bubble 8");
        // The recipient's update (random_id 0) and another device's key settle nothing.
        assert_eq!(pending.settle(&new_message(1, 0)), None);
        assert_eq!(pending.settle(&new_message(1, 9)), None);
        // The answer to 7 was lost: its update settles it, then the late answer nothing.
        let by_update = pending.settle(&new_message(3, 7));
        assert_eq!(by_update.map(|(b, m)| (b, m.id)), Some(("bubble 7", 3)));
        let late = SendMessageResponse {
            message: Some(Message {
                id: 3,
                ..Default::default()
            }),
            random_id: 7,
            ..Default::default()
        };
        assert!(pending.answered(&late).is_none());
        // 8 is answered first: its update then settles nothing.
        let answer = SendMessageResponse {
            random_id: 8,
            ..late
        };
        let by_answer = pending.answered(&answer);
        assert_eq!(by_answer.map(|(b, m)| (b, m.id)), Some(("bubble 8", 3)));
        assert_eq!(pending.settle(&new_message(4, 8)), None);
        assert!(pending.is_empty());
    }
}
