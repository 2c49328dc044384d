//! The arrow every producer of user events shares: events to svc-updates, which assigns pts.
//! Used as an outbox destination (the relay) and directly right after commit (the fast path);
//! svc-updates deduplicates by event id, so the two may overlap.

use oxigram_outbox::{Destination, Outbox, OutboxMessage, Refused, decode_payloads};
use oxigram_proto::{
    internal::v1::{
        AppendReadRequest, AppendReadResponse, AppendRequest, Appended,
        updates_client::UpdatesClient,
    },
    types::v1::UserEvent,
};

use crate::GrpcChannel;

/// The outbox destination name of svc-updates.
pub const TO_UPDATES: &str = "updates";

#[derive(Clone)]
pub struct ToUpdates {
    client: UpdatesClient<GrpcChannel>,
}

impl ToUpdates {
    pub fn new(channel: GrpcChannel) -> Self {
        Self {
            client: UpdatesClient::new(channel),
        }
    }

    /// Appends events to their users' logs; returns the pts each got.
    pub async fn append(&self, events: Vec<UserEvent>) -> Result<Vec<Appended>, tonic::Status> {
        Ok(self
            .client
            .clone()
            .append(AppendRequest { events })
            .await?
            .into_inner()
            .appended)
    }

    /// Logs a read counted as of the reader's log up to `r.basis_pts`.
    pub async fn append_read(
        &self,
        r: AppendReadRequest,
    ) -> Result<AppendReadResponse, tonic::Status> {
        Ok(self.client.clone().append_read(r).await?.into_inner())
    }

    /// The post-commit fast path: appends `events`, deletes their outbox `rows`, and returns
    /// the (pts, pts_count) that `user_id`'s event got. (0, 0) when svc-updates did not answer:
    /// the relay delivers later and the client catches up with getDifference.
    pub async fn fast_path(
        &self,
        outbox: &Outbox,
        events: Vec<UserEvent>,
        rows: &[i64],
        user_id: i64,
    ) -> (i32, i32) {
        self.fast_path_all(outbox, events, rows)
            .await
            .iter()
            .find(|a| a.user_id == user_id)
            .map_or((0, 0), |a| (a.pts, a.pts_count))
    }

    /// The fast path for many events at once: what each got, or nothing when svc-updates did
    /// not answer (the relay delivers later).
    pub async fn fast_path_all(
        &self,
        outbox: &Outbox,
        events: Vec<UserEvent>,
        rows: &[i64],
    ) -> Vec<Appended> {
        match self.append(events).await {
            Ok(appended) => {
                if !rows.is_empty() {
                    outbox.ack(TO_UPDATES, rows.to_vec());
                }
                appended
            }
            Err(status) => {
                tracing::warn!(%status, "fast-path hand-off to updates failed; the relay will retry");
                vec![]
            }
        }
    }
}

impl Destination for ToUpdates {
    const NAME: &'static str = TO_UPDATES;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        self.append(decode_payloads(batch)?)
            .await
            .map_err(crate::refused)?;
        Ok(())
    }
}
