//! The updates of a user's own changes to what the gateway keeps of her (profile, privacy
//! rules, contacts): each change is a durable update in her log, so her other devices
//! converge on it through the stream or getDifference. The events are written to the
//! gateway's outbox in the change's own transaction.

use std::time::{SystemTime, UNIX_EPOCH};

use oxigram_errors::{Error, forward};
use oxigram_proto::{
    types::v1::{Update, UserEvent, update},
    updates::v1 as updates_svc,
};
use sqlx::{Postgres, Transaction};
use tonic::Status;
use uuid::Uuid;

use crate::{Gateway, auth::SignedIn, outbound};

/// Where the caller's log stands after a change: the pts of its last update and how many
/// updates it made (`pts` 0 when svc-updates did not answer in time: the updates are logged
/// later and reach her devices by getDifference; `pts_count` 0 and the current pts when the
/// change changed nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logged {
    pub pts: i32,
    pub pts_count: i32,
}

impl Gateway {
    /// Commits `tx` with one update per kind in `me`'s log, then hands them to svc-updates.
    /// The calling device gets no push of them: its answer carries the pts.
    pub async fn commit_with_updates(
        &self,
        mut tx: Transaction<'_, Postgres>,
        me: SignedIn,
        kinds: Vec<update::Kind>,
    ) -> Result<Logged, Status> {
        if kinds.is_empty() {
            tx.commit().await.map_err(Error::from)?;
            let state = self
                .updates
                .clone()
                .get_state(updates_svc::GetStateRequest {
                    user_id: me.user_id,
                })
                .await
                .map_err(forward)?;
            return Ok(Logged {
                pts: state.into_inner().pts,
                pts_count: 0,
            });
        }
        let date = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default();
        let (rows, events): (Vec<_>, Vec<_>) = kinds
            .into_iter()
            .map(|kind| {
                let event_id = Uuid::new_v4();
                let event = UserEvent {
                    event_id: event_id.to_string(),
                    user_id: me.user_id,
                    pts_count: 1,
                    date,
                    update: Some(Update { kind: Some(kind) }),
                    origin_auth_key_id: me.auth_key_id,
                    ..Default::default()
                };
                (outbound::row(event_id, &event), event)
            })
            .unzip();
        let ids = self
            .outbox
            .enqueue(&mut tx, &rows)
            .await
            .map_err(Error::from)?;
        tx.commit().await.map_err(Error::from)?;
        let pts_count = events.len() as i32;
        let appended = self.to_updates.fast_path(&self.outbox, events, &ids).await;
        let pts = appended
            .and_then(|a| a.appended.iter().map(|a| a.pts).max())
            .unwrap_or(0);
        Ok(Logged { pts, pts_count })
    }
}
