//! A user's profile change told to the users who show her: those she keeps as contacts, those
//! who keep her, and the peers of her dialogs, the online ones only, each with the user as
//! that viewer may see her (`user_view::view`). A transient event like presence: not logged,
//! not replayed; a device that misses it reads the profile in the next answer that names her.
//! It goes out after the change answered, through the transient path (one route lookup, one
//! call per instance, offered in waves), so the caller never waits for it.

use std::{collections::BTreeSet, sync::Arc};

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

impl Gateway {
    /// Tells the users who show `user_id` that her profile changed, in the background.
    pub fn push_profile(self: &Arc<Self>, user_id: i64) {
        let me = self.clone();
        tokio::spawn(async move {
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
