//! What a viewer sees of a user's presence: the one projection of every place that returns a
//! user's status. Exact (online until a time, offline since a time) when the user's last-seen
//! rule lets the viewer see it; otherwise a bucket of how long ago she was last online, as
//! Telegram shows it: recently (online now included), within a week, within a month, or
//! nothing at all (longer ago, or never seen).

use oxigram_proto::types::v1::{
    User, UserStatus, UserStatusLastMonth, UserStatusLastWeek, UserStatusOffline, UserStatusOnline,
    UserStatusRecently, user_status,
};

use crate::{Gateway, transient::now_ms};

const DAY: i64 = 24 * 60 * 60;
/// Last online within this long ago shows as "recently" to a viewer who may not see the time.
pub const RECENTLY: i64 = 3 * DAY;
pub const LAST_WEEK: i64 = 7 * DAY;
pub const LAST_MONTH: i64 = 30 * DAY;

/// A user's presence as the server knows it (Unix seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// Online; counts as such until `expires` unless told otherwise.
    Online { expires: i64 },
    /// Offline, last online at `was_online`.
    Offline { was_online: i64 },
    /// Never seen online (or her last seen is lost).
    Unknown,
}

/// The status `viewer` sees of a user whose presence is `presence` at `now`; `exact_visible`
/// is the user's last-seen rule applied to that viewer.
pub fn project(presence: Presence, exact_visible: bool, now: i64) -> Option<UserStatus> {
    let kind = match (presence, exact_visible) {
        (Presence::Unknown, _) => return None,
        (Presence::Online { expires }, true) => {
            user_status::Kind::Online(UserStatusOnline { expires })
        }
        (Presence::Offline { was_online }, true) => {
            user_status::Kind::Offline(UserStatusOffline { was_online })
        }
        (Presence::Online { .. }, false) => user_status::Kind::Recently(UserStatusRecently {}),
        (Presence::Offline { was_online }, false) => {
            let ago = now - was_online;
            if ago <= RECENTLY {
                user_status::Kind::Recently(UserStatusRecently {})
            } else if ago <= LAST_WEEK {
                user_status::Kind::LastWeek(UserStatusLastWeek {})
            } else if ago <= LAST_MONTH {
                user_status::Kind::LastMonth(UserStatusLastMonth {})
            } else {
                return None;
            }
        }
    };
    Some(UserStatus { kind: Some(kind) })
}

impl Gateway {
    /// Sets each user's `status` as `viewer` sees it (her own too). When presence cannot be
    /// read (Redis down), the users go without one: a status is never worth failing a call.
    pub async fn with_statuses(&self, viewer: i64, users: &mut [User]) {
        let ids: Vec<i64> = users.iter().map(|u| u.id).collect();
        let presences = match self.presence.presences(&ids).await {
            Ok(presences) => presences,
            Err(err) => {
                tracing::debug!(error = %err, "users answered without statuses");
                return;
            }
        };
        // Her LAST_SEEN rule decides who sees the exact time; when it cannot be read, nobody
        // does (the approximate status gives nothing away).
        let exact_for = match self.exact_last_seen_of(viewer, &ids).await {
            Ok(owners) => owners,
            Err(err) => {
                tracing::debug!(error = %err, "statuses answered approximately");
                Default::default()
            }
        };
        let now = now_ms() / 1000;
        for user in users {
            if let Some(presence) = presences.get(&user.id) {
                let exact = user.id == viewer || exact_for.contains(&user.id);
                user.status = project(*presence, exact, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum Seen {
        Nothing,
        Online(i64),
        Offline(i64),
        Recently,
        LastWeek,
        LastMonth,
    }

    fn seen(status: Option<UserStatus>) -> Seen {
        match status.and_then(|s| s.kind) {
            None => Seen::Nothing,
            Some(user_status::Kind::Online(o)) => Seen::Online(o.expires),
            Some(user_status::Kind::Offline(o)) => Seen::Offline(o.was_online),
            Some(user_status::Kind::Recently(_)) => Seen::Recently,
            Some(user_status::Kind::LastWeek(_)) => Seen::LastWeek,
            Some(user_status::Kind::LastMonth(_)) => Seen::LastMonth,
        }
    }

    #[test]
    fn every_presence_projects_to_its_status_or_bucket() {
        let now = 1_000_000_000;
        let ago = |secs: i64| Presence::Offline {
            was_online: now - secs,
        };
        let online = Presence::Online { expires: now + 60 };
        let table = [
            (Presence::Unknown, true, Seen::Nothing),
            (Presence::Unknown, false, Seen::Nothing),
            (online, true, Seen::Online(now + 60)),
            (online, false, Seen::Recently),
            (ago(0), true, Seen::Offline(now)),
            (ago(400 * DAY), true, Seen::Offline(now - 400 * DAY)),
            (ago(0), false, Seen::Recently),
            (ago(60), false, Seen::Recently),
            (ago(RECENTLY), false, Seen::Recently),
            (ago(RECENTLY + 1), false, Seen::LastWeek),
            (ago(LAST_WEEK), false, Seen::LastWeek),
            (ago(LAST_WEEK + 1), false, Seen::LastMonth),
            (ago(LAST_MONTH), false, Seen::LastMonth),
            (ago(LAST_MONTH + 1), false, Seen::Nothing),
            (ago(400 * DAY), false, Seen::Nothing),
            // A clock a little ahead of the viewer's now.
            (ago(-5), false, Seen::Recently),
        ];
        for (presence, exact, expected) in table {
            assert_eq!(
                seen(project(presence, exact, now)),
                expected,
                "{presence:?} exact={exact}"
            );
        }
    }
}
