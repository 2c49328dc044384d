//! Presence: whether a user is online, and when she last was. She is online while a device of
//! hers streams (its route is in Redis) or for `online_after_call_secs` after a call, unless
//! she said she is away (`UpdateStatus(offline = true)`), which holds until she says she is
//! back or opens a stream. Redis keeps what can be rebuilt, one hash per user: the end of the
//! call window (`until`), the moment she went away (`away`), the last close of a stream
//! (`seen`) and the state last announced (`told`); Postgres keeps her last time online once
//! she went offline (`last_seen`).
//!
//! Changes are announced to the users who have a dialog with her (svc-dialogs' list, cached),
//! those online only and never one she blocked (svc-messages' blocks, read at each
//! announcement), as a transient event each, with the status each may see. Announcements
//! are coalesced per user: at most one per `COALESCE` on an instance, carrying the presence
//! as it is when it goes out, and only when it differs from the last one announced. A stream
//! that closes is announced after `offline_grace_ms`, so a device that reconnects at once
//! announces nothing.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use oxigram_kit::{GrpcChannel, config::GatewayConfig};
use oxigram_proto::{
    dialogs::v1::{GetDialogsRequest, dialogs_client::DialogsClient},
    gateway::v1::{TransientEvent, transient_event},
    messages::v1::{BlockedAmongRequest, messages_client::MessagesClient},
    types::v1::{self as types, UpdateUserStatus},
};
use oxigram_routes::{RedisHandle, RouteLookup};
use sqlx::PgPool;

use crate::{
    last_seen, people,
    privacy::{Key, Relation, Sight, sees_exact_last_seen},
    status::{self, Presence},
    transient::{Transient, now_ms},
};

/// At most one announcement per user per this long, per gateway instance.
pub const COALESCE: Duration = Duration::from_secs(3);
/// How long a user's dialog peers are reused before svc-dialogs is asked again (a dialog
/// made meanwhile hears of her from then on).
const PEERS_TTL: Duration = Duration::from_secs(30);
/// The most dialog peers an announcement reaches (the most recent dialogs).
pub const MAX_ANNOUNCED_PEERS: usize = 10_000;
/// Peers asked about per BlockedAmong call (svc-messages' most ids).
const BLOCKS_CHUNK: usize = 1000;
const DIALOGS_PAGE: i32 = 100;
/// How long Redis keeps a user's presence hash after its last write.
const PRESENCE_TTL_SECS: i64 = 35 * 24 * 60 * 60;
/// Users this instance keeps local presence state for before it forgets the idle ones.
const MAX_LOCAL: usize = 200_000;

/// What one instance remembers of a user's presence.
#[derive(Default)]
struct Local {
    /// When her next call refreshes the call window in Redis.
    mark_due: Option<Instant>,
    /// When this instance last announced her presence.
    announced_at: Option<Instant>,
    /// An announcement is scheduled.
    pending: bool,
    /// A re-check at the end of her online window is scheduled.
    recheck: bool,
}

/// The presence hash of a user, as read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Stored {
    until_ms: i64,
    away_ms: i64,
    seen_ms: i64,
}

/// A user's presence from what Redis says of her (`stored`, whether a device streams) and
/// her last seen in Postgres, at `now_ms`. `online_expires_ms`: how long a streaming
/// device keeps her online without news (its route's lifetime).
fn presence_of(
    stored: Stored,
    streams: bool,
    recorded: Option<i64>,
    now_ms: i64,
    online_expires_ms: i64,
) -> Presence {
    if stored.away_ms > 0 {
        return Presence::Offline {
            was_online: stored.away_ms / 1000,
        };
    }
    if streams || stored.until_ms > now_ms {
        let streaming = if streams {
            now_ms + online_expires_ms
        } else {
            0
        };
        return Presence::Online {
            expires: stored.until_ms.max(streaming) / 1000,
        };
    }
    let last = stored.seen_ms.max(stored.until_ms) / 1000;
    match recorded.unwrap_or(0).max(last) {
        0 => Presence::Unknown,
        was_online => Presence::Offline { was_online },
    }
}

/// The sight of a peer she did not block.
fn sight(exact: bool) -> Sight {
    if exact { Sight::Exact } else { Sight::Bucket }
}

/// Presence tracking and announcements of one gateway instance.
pub struct PresenceTracker {
    redis: RedisHandle,
    prefix: String,
    routes: RouteLookup,
    pool: PgPool,
    dialogs: DialogsClient<GrpcChannel>,
    messages: MessagesClient<GrpcChannel>,
    transient: Arc<Transient>,
    grace: Duration,
    call_window: Duration,
    route_ttl: Duration,
    local: Mutex<HashMap<i64, Local>>,
    peers: Mutex<HashMap<i64, CachedPeers>>,
}

/// A user's dialog peers, and when they were read.
type CachedPeers = (Arc<Vec<i64>>, Instant);

impl PresenceTracker {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        redis: RedisHandle,
        prefix: &str,
        routes: RouteLookup,
        pool: PgPool,
        dialogs: DialogsClient<GrpcChannel>,
        messages: MessagesClient<GrpcChannel>,
        transient: Arc<Transient>,
        config: &GatewayConfig,
    ) -> Arc<Self> {
        Arc::new(Self {
            redis,
            prefix: prefix.to_owned(),
            routes,
            pool,
            dialogs,
            messages,
            transient,
            grace: Duration::from_millis(config.offline_grace_ms),
            call_window: Duration::from_secs(config.online_after_call_secs.max(1)),
            route_ttl: Duration::from_secs(config.route_ttl_secs.max(1)),
            local: Mutex::new(HashMap::new()),
            peers: Mutex::new(HashMap::new()),
        })
    }

    fn key(&self, user_id: i64) -> String {
        format!("{}presence:{user_id}", self.prefix)
    }

    fn with_local<T>(&self, user_id: i64, f: impl FnOnce(&mut Local) -> T) -> T {
        let mut lost = Local::default();
        let Ok(mut local) = self.local.lock() else {
            return f(&mut lost);
        };
        if local.len() >= MAX_LOCAL {
            local.retain(|_, l| l.pending || l.recheck);
        }
        f(local.entry(user_id).or_default())
    }

    /// A call of `user_id`: she is online for the call window. Redis hears of it at most
    /// twice per window per instance, so a call costs nothing more in between.
    pub fn touch(self: &Arc<Self>, user_id: i64) {
        let now = Instant::now();
        let due = self.with_local(user_id, |l| {
            if l.mark_due.is_some_and(|due| now < due) {
                return false;
            }
            l.mark_due = Some(now + self.call_window / 2);
            true
        });
        if due {
            let me = self.clone();
            tokio::spawn(async move {
                if me.write(user_id, &[("until", me.call_end())], &[]).await {
                    me.changed(user_id);
                }
            });
        }
    }

    fn call_end(&self) -> i64 {
        now_ms() + self.call_window.as_millis() as i64
    }

    /// A stream of `user_id` opened here: an explicit away ends.
    pub fn stream_opened(self: &Arc<Self>, user_id: i64) {
        let me = self.clone();
        tokio::spawn(async move {
            if me.write(user_id, &[], &["away"]).await {
                me.changed(user_id);
            }
        });
    }

    /// The last stream of `user_id` here closed: she goes offline after the grace period,
    /// unless a device streams again by then (here or elsewhere) or a call keeps her online.
    pub fn last_stream_closed(self: &Arc<Self>, user_id: i64) {
        let me = self.clone();
        tokio::spawn(async move {
            me.write(user_id, &[("seen", now_ms())], &[]).await;
            tokio::time::sleep(me.grace).await;
            me.changed(user_id);
        });
    }

    /// `UpdateStatus`: away (offline now, until she says she is back or opens a stream), or
    /// back (online for the call window).
    pub async fn set_offline(self: &Arc<Self>, user_id: i64, offline: bool) {
        let now = now_ms();
        let written = if offline {
            self.write(user_id, &[("away", now), ("seen", now)], &["until"])
                .await
        } else {
            self.with_local(user_id, |l| {
                l.mark_due = Some(Instant::now() + self.call_window / 2)
            });
            self.write(user_id, &[("until", self.call_end())], &["away"])
                .await
        };
        if written {
            self.changed(user_id);
        }
    }

    /// Sets and deletes fields of the user's presence hash; false (logged) when Redis fails:
    /// presence is then as it was until the next change.
    async fn write(&self, user_id: i64, set: &[(&str, i64)], delete: &[&str]) -> bool {
        let key = self.key(user_id);
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (field, value) in set {
            pipe.hset(&key, *field, *value).ignore();
        }
        for field in delete {
            pipe.hdel(&key, *field).ignore();
        }
        pipe.expire(&key, PRESENCE_TTL_SECS).ignore();
        match self.redis.query::<()>(&pipe).await {
            Ok(()) => true,
            Err(err) => {
                tracing::debug!(error = %err, "presence not written");
                false
            }
        }
    }

    /// The presence of each of `user_ids` now: Redis first ([`Self::live_presences`]), then
    /// Postgres' last seen for those Redis knows nothing of.
    pub async fn presences(&self, user_ids: &[i64]) -> anyhow::Result<HashMap<i64, Presence>> {
        let mut found = self.live_presences(user_ids).await?;
        let unknown: Vec<i64> = found
            .iter()
            .filter(|(_, presence)| **presence == Presence::Unknown)
            .map(|(user, _)| *user)
            .collect();
        if !unknown.is_empty() {
            for (user, was_online) in last_seen::of(&self.pool, &unknown).await? {
                found.insert(user, Presence::Offline { was_online });
            }
        }
        Ok(found)
    }

    /// The presence of each of `user_ids` as Redis knows it, in two round trips at once (the
    /// presence hashes, the routes): `Presence::Unknown` for those it knows nothing of, whose
    /// last seen is in Postgres (a caller that reads their rows anyway takes it from there).
    pub async fn live_presences(&self, user_ids: &[i64]) -> anyhow::Result<HashMap<i64, Presence>> {
        if user_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut pipe = redis::pipe();
        for user in user_ids {
            pipe.cmd("HMGET")
                .arg(self.key(*user))
                .arg(&["until", "away", "seen"]);
        }
        let (stored, routes) = tokio::join!(
            self.redis
                .query::<Vec<(Option<i64>, Option<i64>, Option<i64>)>>(&pipe),
            self.routes.lookup_many(user_ids)
        );
        let (stored, routes) = (stored?, routes?);
        let now = now_ms();
        let ttl = self.route_ttl.as_millis() as i64;
        let mut found = HashMap::with_capacity(user_ids.len());
        for (user, (until, away, seen)) in user_ids.iter().zip(stored) {
            let stored = Stored {
                until_ms: until.unwrap_or(0),
                away_ms: away.unwrap_or(0),
                seen_ms: seen.unwrap_or(0),
            };
            let streams = routes.routes.get(user).is_some_and(|r| !r.is_empty());
            found.insert(*user, presence_of(stored, streams, None, now, ttl));
        }
        Ok(found)
    }

    /// The user's presence may have changed: announce it now, or at the end of the current
    /// coalescing window (one announcement, with the presence as it is then).
    pub fn changed(self: &Arc<Self>, user_id: i64) {
        let now = Instant::now();
        let wait = self.with_local(user_id, |l| {
            if l.pending {
                return None;
            }
            l.pending = true;
            Some(
                l.announced_at
                    .map_or(Duration::ZERO, |at| COALESCE.saturating_sub(now - at)),
            )
        });
        let Some(wait) = wait else { return };
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            me.with_local(user_id, |l| l.pending = false);
            if let Err(err) = me.announce_if_changed(user_id).await {
                tracing::debug!(user_id, error = %err, "presence not announced");
            }
        });
    }

    async fn announce_if_changed(self: &Arc<Self>, user_id: i64) -> anyhow::Result<()> {
        let presence = self
            .presences(&[user_id])
            .await?
            .remove(&user_id)
            .unwrap_or(Presence::Unknown);
        let online = match presence {
            Presence::Online { expires } => {
                // Nobody tells this instance when a call window ends: look again then.
                let left = (expires * 1000 - now_ms()).max(0) as u64;
                self.recheck_after(user_id, Duration::from_millis(left) + self.grace);
                true
            }
            Presence::Offline { .. } | Presence::Unknown => false,
        };
        let told = if online { "1" } else { "0" };
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("HGET")
            .arg(self.key(user_id))
            .arg("told")
            .hset(self.key(user_id), "told", told)
            .ignore();
        let (before,): (Option<String>,) = self.redis.query(&pipe).await?;
        if before.as_deref() == Some(told) {
            return Ok(());
        }
        if let Presence::Offline { was_online } = presence {
            last_seen::record(&self.pool, user_id, was_online * 1000).await?;
        }
        self.with_local(user_id, |l| l.announced_at = Some(Instant::now()));
        self.announce(user_id, presence).await;
        Ok(())
    }

    fn recheck_after(self: &Arc<Self>, user_id: i64, after: Duration) {
        let first = self.with_local(user_id, |l| !std::mem::replace(&mut l.recheck, true));
        if !first {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            me.with_local(user_id, |l| l.recheck = false);
            me.changed(user_id);
        });
    }

    /// Which of `viewers` see `owner`'s exact last seen: her LAST_SEEN rule and whom she keeps
    /// as contacts (the rule `Gateway::users_for` applies; the viewers she blocked are
    /// left out before). None when the rule cannot be read: the approximate status gives
    /// nothing away.
    async fn exact_last_seen_for(&self, owner: i64, viewers: &[i64]) -> HashSet<i64> {
        let rules = people::privacy_rules(&self.pool, &[owner], &[Key::LastSeen]).await;
        let kept = people::kept_of(&self.pool, owner, viewers).await;
        let (Ok(rules), Ok(kept)) = (rules, kept) else {
            tracing::debug!(owner, "presence announced approximately: rules unreadable");
            return HashSet::new();
        };
        let rule = rules.of(owner, Key::LastSeen);
        viewers
            .iter()
            .copied()
            .filter(|&viewer| {
                sees_exact_last_seen(
                    &rule,
                    &Relation {
                        viewer_id: viewer,
                        owner_id: owner,
                        in_owner_contacts: kept.contains(&viewer),
                        blocked_by_owner: false,
                    },
                )
            })
            .collect()
    }

    /// Which of `users` `owner` blocked, from svc-messages.
    pub(crate) async fn blocked_among(
        &self,
        owner: i64,
        users: &[i64],
    ) -> anyhow::Result<HashSet<i64>> {
        let mut blocked = HashSet::new();
        for chunk in users.chunks(BLOCKS_CHUNK) {
            let request = BlockedAmongRequest {
                owner_id: owner,
                user_ids: chunk.to_vec(),
            };
            let found = self.messages.clone().blocked_among(request).await?;
            blocked.extend(found.into_inner().user_ids);
        }
        Ok(blocked)
    }

    /// Pushes the user's presence to the online users who have a dialog with her, but none
    /// she blocked, each with the status her last-seen rule lets them see; returns how many
    /// were offered it.
    pub async fn announce(&self, user_id: i64, presence: Presence) -> usize {
        let peers = match self.dialog_peers(user_id).await {
            Ok(peers) => peers,
            Err(err) => {
                tracing::debug!(user_id, error = %err, "no dialog peers to announce to");
                return 0;
            }
        };
        // Unknown blocks announce nothing: a bucket could tell a blocked peer more than she
        // may know.
        let blocked = match self.blocked_among(user_id, &peers).await {
            Ok(blocked) => blocked,
            Err(err) => {
                tracing::debug!(user_id, error = %err, "presence not announced: blocks unread");
                return 0;
            }
        };
        let listeners: Vec<i64> = peers
            .iter()
            .copied()
            .filter(|peer| *peer != user_id && !blocked.contains(peer))
            .collect();
        let exact_for = self.exact_last_seen_for(user_id, &listeners).await;
        let (now, made_at_ms) = (now_ms() / 1000, now_ms());
        let events: Vec<TransientEvent> = listeners
            .iter()
            .map(|peer| TransientEvent {
                user_id: *peer,
                made_at_ms,
                kind: Some(transient_event::Kind::UserStatus(UpdateUserStatus {
                    user_id,
                    status: status::project(presence, sight(exact_for.contains(peer)), now),
                })),
            })
            .collect();
        let offered = events.len();
        self.transient.push(events).await;
        offered
    }

    /// The peers of the user's dialogs, most recent first (at most `MAX_ANNOUNCED_PEERS`),
    /// from svc-dialogs, kept for `PEERS_TTL`.
    pub(crate) async fn dialog_peers(&self, user_id: i64) -> anyhow::Result<Arc<Vec<i64>>> {
        if let Ok(peers) = self.peers.lock()
            && let Some((list, at)) = peers.get(&user_id)
            && at.elapsed() < PEERS_TTL
        {
            return Ok(list.clone());
        }
        let mut list = Vec::new();
        // The main list, then the archive: an archived dialog's peer hears of her too.
        for folder_id in [0, 1] {
            let mut page = types::GetDialogsRequest {
                limit: DIALOGS_PAGE,
                folder_id,
                ..Default::default()
            };
            while list.len() < MAX_ANNOUNCED_PEERS {
                let request = GetDialogsRequest {
                    owner_id: user_id,
                    request: Some(page),
                };
                let dialogs = self.dialogs.clone().get_dialogs(request).await?;
                let dialogs = dialogs.into_inner().dialogs;
                list.extend(dialogs.iter().map(|d| d.peer_user()).filter(|p| *p > 0));
                match dialogs.last() {
                    Some(last) if dialogs.len() == DIALOGS_PAGE as usize => {
                        page.offset_date = last.top_message_date;
                        page.offset_id = last.top_message_id;
                        page.offset_peer = last.peer;
                        page.offset_pinned = last.pinned;
                    }
                    _ => break,
                }
            }
        }
        list.truncate(MAX_ANNOUNCED_PEERS);
        let list = Arc::new(list);
        // No dialogs is not kept: the first one may come any moment, and asking costs little.
        if list.is_empty() {
            return Ok(list);
        }
        if let Ok(mut peers) = self.peers.lock() {
            if peers.len() >= MAX_LOCAL {
                peers.retain(|_, (_, at)| at.elapsed() < PEERS_TTL);
            }
            peers.insert(user_id, (list.clone(), Instant::now()));
        }
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presence_follows_streams_calls_and_away() {
        let now = 1_000_000_000_000;
        let ttl = 60_000;
        let stored = |until_ms, away_ms, seen_ms| Stored {
            until_ms,
            away_ms,
            seen_ms,
        };
        let table = [
            // Never seen.
            (stored(0, 0, 0), false, None, Presence::Unknown),
            // Only Postgres remembers her.
            (
                stored(0, 0, 0),
                false,
                Some(900),
                Presence::Offline { was_online: 900 },
            ),
            // A stream keeps her online for its route's lifetime.
            (
                stored(0, 0, 0),
                true,
                None,
                Presence::Online {
                    expires: (now + ttl) / 1000,
                },
            ),
            // A call window that lasts longer than that.
            (
                stored(now + 2 * ttl, 0, 0),
                true,
                None,
                Presence::Online {
                    expires: (now + 2 * ttl) / 1000,
                },
            ),
            // A call window without a stream.
            (
                stored(now + 5_000, 0, 0),
                false,
                None,
                Presence::Online {
                    expires: (now + 5_000) / 1000,
                },
            ),
            // The window is over: offline since it ended, or since the last stream closed.
            (
                stored(now - 5_000, 0, now - 9_000),
                false,
                None,
                Presence::Offline {
                    was_online: (now - 5_000) / 1000,
                },
            ),
            (
                stored(now - 9_000, 0, now - 5_000),
                false,
                Some(1),
                Presence::Offline {
                    was_online: (now - 5_000) / 1000,
                },
            ),
            // Away wins over a stream and a call window.
            (
                stored(now + 5_000, now - 1_000, 0),
                true,
                None,
                Presence::Offline {
                    was_online: (now - 1_000) / 1000,
                },
            ),
        ];
        for (stored, streams, recorded, expected) in table {
            assert_eq!(
                presence_of(stored, streams, recorded, now, ttl),
                expected,
                "{stored:?} streams={streams} recorded={recorded:?}"
            );
        }
    }
}
