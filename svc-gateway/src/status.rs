//! What a viewer sees of a user's presence: the one projection of every place that returns a
//! user's status. Exact (online until a time, offline since a time) when the user's last-seen
//! rule lets the viewer see it; otherwise a bucket of how long ago she was last online, as
//! Telegram shows it: recently (online now included), within a week, within a month, or
//! nothing at all (longer ago, never seen, or she blocked the viewer).

use oxigram_proto::types::v1::{
    UserStatus, UserStatusLastMonth, UserStatusLastWeek, UserStatusOffline, UserStatusOnline,
    UserStatusRecently, user_status,
};

use crate::privacy::Sight;

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

/// The status a viewer sees of a user whose presence is `presence` at `now`; `sight` is the
/// user's last-seen rule applied to that viewer (`privacy::last_seen_sight`).
pub fn project(presence: Presence, sight: Sight, now: i64) -> Option<UserStatus> {
    let kind = match (presence, sight) {
        (Presence::Unknown, _) | (_, Sight::Nothing) => return None,
        (Presence::Online { expires }, Sight::Exact) => {
            user_status::Kind::Online(UserStatusOnline { expires })
        }
        (Presence::Offline { was_online }, Sight::Exact) => {
            user_status::Kind::Offline(UserStatusOffline { was_online })
        }
        (Presence::Online { .. }, Sight::Bucket) => {
            user_status::Kind::Recently(UserStatusRecently {})
        }
        (Presence::Offline { was_online }, Sight::Bucket) => {
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
        let (exact, bucket, blocked) = (Sight::Exact, Sight::Bucket, Sight::Nothing);
        let table = [
            (Presence::Unknown, exact, Seen::Nothing),
            (Presence::Unknown, bucket, Seen::Nothing),
            (online, exact, Seen::Online(now + 60)),
            (online, bucket, Seen::Recently),
            (ago(0), exact, Seen::Offline(now)),
            (ago(400 * DAY), exact, Seen::Offline(now - 400 * DAY)),
            (ago(0), bucket, Seen::Recently),
            (ago(60), bucket, Seen::Recently),
            (ago(RECENTLY), bucket, Seen::Recently),
            (ago(RECENTLY + 1), bucket, Seen::LastWeek),
            (ago(LAST_WEEK), bucket, Seen::LastWeek),
            (ago(LAST_WEEK + 1), bucket, Seen::LastMonth),
            (ago(LAST_MONTH), bucket, Seen::LastMonth),
            (ago(LAST_MONTH + 1), bucket, Seen::Nothing),
            (ago(400 * DAY), bucket, Seen::Nothing),
            // A clock a little ahead of the viewer's now.
            (ago(-5), bucket, Seen::Recently),
            // Whom she blocked sees "a long time ago", online or not.
            (online, blocked, Seen::Nothing),
            (ago(0), blocked, Seen::Nothing),
            (ago(LAST_WEEK), blocked, Seen::Nothing),
        ];
        for (presence, sight, expected) in table {
            assert_eq!(
                seen(project(presence, sight, now)),
                expected,
                "{presence:?} {sight:?}"
            );
        }
    }
}
