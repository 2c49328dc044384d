//! Transient events as a device shows them: what a peer is doing in a chat (until when), and
//! users' presence changes. They carry no pts and are never in getDifference: a device that
//! missed one (offline, reconnecting) simply shows the next.

use std::time::Duration;

use oxigram_proto::types::v1::{
    SendMessageAction, UpdateUserTyping, UserStatus, send_message_action,
};
use tokio::time::Instant;

/// A peer's action in the private chat with her, shown until `expires_at` unless another one
/// comes (a `CANCEL` has expired at once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Typing {
    pub user_id: i64,
    pub action: SendMessageAction,
    pub expires_at: Instant,
}

impl Typing {
    /// The event as it arrived at `now`.
    pub fn arrived(update: UpdateUserTyping, now: Instant) -> Self {
        Self {
            user_id: update.user_id,
            action: update.action.unwrap_or_default(),
            expires_at: now + Duration::from_millis(update.timeout_ms.max(0) as u64),
        }
    }

    /// How long it still shows at `now`.
    pub fn timeout(&self, now: Instant) -> Duration {
        self.expires_at.saturating_duration_since(now)
    }

    /// Whether it still shows at `now`: not a cancel, and not expired.
    pub fn shows_at(&self, now: Instant) -> bool {
        self.action.kind != send_message_action::Kind::Cancel as i32 && now < self.expires_at
    }
}

/// A user's presence changed (`status` as this user may see it; `None`: nothing to show).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusChange {
    pub user_id: i64,
    pub status: Option<UserStatus>,
}
