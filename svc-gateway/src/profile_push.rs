//! A user's profile change told to the users who show her: those she keeps as contacts, those
//! who keep her, and the peers of her dialogs, the online ones only, each with the user as
//! that viewer may see her (`user_view::view`). A transient event like presence: not logged,
//! not replayed; a device that misses it reads the profile in the next answer that names her.
//! It goes out after the change answered, through the transient path (one route lookup, one
//! call per instance, offered in waves), so the caller never waits for it.
//!
//! Pushes are coalesced per user like presence announcements: the first change goes out at
//! once, and the changes that follow within `COALESCE` of a push make one more push at the end
//! of that window, carrying the profile as it is then. A burst of changes therefore reaches
//! each viewer as at most two pushes, the last with the latest state, and a user who changes
//! her profile without pause costs her viewers one push per window.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use oxigram_proto::{
    gateway::v1::{TransientEvent, transient_event},
    types::v1::UpdateUser,
};

use crate::{
    Gateway, people,
    presence::MAX_ANNOUNCED_PEERS,
    transient::now_ms,
    user_view::{VIEW_KEYS, view},
};

/// At most one profile push per user per this long, per gateway instance.
pub const COALESCE: Duration = Duration::from_secs(1);
/// Users this instance remembers pushes of before it forgets those with none pending.
const MAX_LOCAL: usize = 200_000;

/// What one instance remembers of a user's profile pushes.
#[derive(Default, Clone, Copy)]
struct Local {
    /// When this instance last started a push of her profile.
    pushed_at: Option<Instant>,
    /// A push is scheduled: later changes ride on it.
    pending: bool,
}

/// The profile pushes of one gateway instance: which users have one scheduled, and when each
/// was last pushed.
#[derive(Default)]
pub struct ProfilePushes {
    local: Mutex<HashMap<i64, Local>>,
}

impl ProfilePushes {
    /// A change of `user_id`'s profile at `now`: how long to wait before pushing it, or
    /// `None` when a push is already scheduled (it reads the profile when it goes out, so it
    /// carries this change too).
    fn schedule(&self, user_id: i64, now: Instant) -> Option<Duration> {
        let Ok(mut local) = self.local.lock() else {
            // A poisoned map only loses the coalescing, never the push.
            return Some(Duration::ZERO);
        };
        if local.len() >= MAX_LOCAL {
            local.retain(|_, l| l.pending || l.pushed_at.is_some_and(|at| now - at < COALESCE));
        }
        let l = local.entry(user_id).or_default();
        if l.pending {
            return None;
        }
        l.pending = true;
        Some(
            l.pushed_at
                .map_or(Duration::ZERO, |at| COALESCE.saturating_sub(now - at)),
        )
    }

    /// The scheduled push of `user_id` starts at `now`: changes from here on schedule the
    /// next one.
    fn started(&self, user_id: i64, now: Instant) {
        if let Ok(mut local) = self.local.lock() {
            let l = local.entry(user_id).or_default();
            l.pending = false;
            l.pushed_at = Some(now);
        }
    }
}

impl Gateway {
    /// Tells the users who show `user_id` that her profile changed, in the background: now,
    /// or at the end of the current coalescing window (see the module's comment).
    pub fn push_profile(self: &Arc<Self>, user_id: i64) {
        let Some(wait) = self.profile_pushes.schedule(user_id, Instant::now()) else {
            return;
        };
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            me.profile_pushes.started(user_id, Instant::now());
            if let Err(err) = me.push_profile_now(user_id).await {
                tracing::debug!(user_id, error = %err, "profile change not pushed");
            }
        });
    }

    /// Pushes `user_id`'s profile to whoever shows her and is online; returns how many
    /// viewers were offered it.
    async fn push_profile_now(&self, user_id: i64) -> anyhow::Result<usize> {
        let mut viewers: BTreeSet<i64> = people::contact_ids(&self.pool, user_id)
            .await?
            .into_iter()
            .collect();
        viewers.extend(people::keepers_of(&self.pool, user_id, MAX_ANNOUNCED_PEERS as i64).await?);
        viewers.extend(self.presence.dialog_peers(user_id).await?.iter().copied());
        viewers.remove(&user_id);
        let viewers: Vec<i64> = viewers.into_iter().take(MAX_ANNOUNCED_PEERS).collect();
        // Each view costs a probe: only the viewers with a device streaming get one.
        let routes = self.transient.routes.lookup_many(&viewers).await?;
        let online: Vec<i64> = viewers
            .into_iter()
            .filter(|v| routes.routes.get(v).is_some_and(|r| !r.is_empty()))
            .collect();
        if online.is_empty() {
            return Ok(0);
        }
        let rules = people::privacy_rules(&self.pool, &[user_id], &VIEW_KEYS).await?;
        let blocked = self.presence.blocked_among(user_id, &online).await?;
        let made_at_ms = now_ms();
        let events: Vec<TransientEvent> = people::profile_for_viewers(&self.pool, user_id, &online)
            .await?
            .into_iter()
            .map(|f| {
                let seen = view(f.viewer_id, f.found, &rules, blocked.contains(&f.viewer_id));
                TransientEvent {
                    user_id: f.viewer_id,
                    made_at_ms,
                    kind: Some(transient_event::Kind::User(UpdateUser { user: Some(seen) })),
                }
            })
            .collect();
        let offered = events.len();
        self.transient.push(events).await;
        Ok(offered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_changes_makes_one_push_now_and_one_at_the_end_of_the_window() {
        let pushes = ProfilePushes::default();
        let t0 = Instant::now();
        // The first change goes out at once.
        assert_eq!(pushes.schedule(7, t0), Some(Duration::ZERO));
        // Until it starts, further changes ride on it.
        assert_eq!(pushes.schedule(7, t0), None);
        pushes.started(7, t0);
        // A change right after a push waits for the window's end; the rest of the burst rides
        // on that one.
        let t1 = t0 + Duration::from_millis(200);
        assert_eq!(
            pushes.schedule(7, t1),
            Some(COALESCE - Duration::from_millis(200))
        );
        for ms in [300, 500, 900] {
            assert_eq!(pushes.schedule(7, t0 + Duration::from_millis(ms)), None);
        }
        // Another user is not held by her window.
        assert_eq!(pushes.schedule(8, t1), Some(Duration::ZERO));
        pushes.started(7, t0 + COALESCE);
        // A change long after the last push goes out at once again.
        let later = t0 + 3 * COALESCE;
        assert_eq!(pushes.schedule(7, later), Some(Duration::ZERO));
    }
}
