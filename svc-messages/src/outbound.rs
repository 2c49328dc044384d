//! Everything svc-messages sends to other services. One arrow: the events of each new message,
//! each edit, each delete and each read of contents, one per owner, to svc-updates, which gives them their pts. They are
//! written to this service's outbox in the change's transaction; right after commit the fast
//! path hands them on and answers the call with the pts the caller's event got, and the relay
//! delivers whatever it missed. svc-updates deduplicates by event id, so the two may overlap.

use oxigram_kit::GrpcChannel;
use oxigram_outbox::{Destination, Outbox, OutboxMessage, Refused, decode_payloads};
use oxigram_proto::{
    types::v1::UserEvent,
    updates::v1::{AppendRequest, Appended, updates_client::UpdatesClient},
};
use uuid::Uuid;

/// The outbox destination of the events for svc-updates.
pub const TO_UPDATES: &str = "updates";

/// The id of the new-message event of one owner's box: derived, so a replayed send finds the
/// pts its first attempt got.
pub fn new_message_event_id(body_id: i64, owner_id: i64) -> Uuid {
    // High half: a tag ("msg" + 0) and the body; low half: the owner.
    Uuid::from_u64_pair(0x6d73_6700_0000_0000 ^ body_id as u64, owner_id as u64)
}

/// The id of the event of one owner's box for the `version`-th edit of `body_id`: derived, so
/// the relay and the fast path of one edit are one fact to svc-updates, and two edits two.
pub fn edit_event_id(body_id: i64, version: i32, owner_id: i64) -> Uuid {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"edit");
    h.update(body_id.to_le_bytes());
    h.update(version.to_le_bytes());
    h.update(owner_id.to_le_bytes());
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Uuid::from_bytes(bytes)
}

/// The id of the delete event of `owner_id` for her boxes `ids` (ascending): derived, so the
/// relay and the fast path of one delete are one fact to svc-updates. A box is deleted once,
/// so two deletes never name the same boxes.
pub fn delete_event_id(owner_id: i64, ids: &[i64]) -> Uuid {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"delete");
    h.update(owner_id.to_le_bytes());
    for id in ids {
        h.update(id.to_le_bytes());
    }
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Uuid::from_bytes(bytes)
}

/// The way to svc-updates: the relay's destination and the fast path.
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

    async fn append(&self, events: Vec<UserEvent>) -> Result<Vec<Appended>, tonic::Status> {
        let answer = self.client.clone().append(AppendRequest { events }).await?;
        Ok(answer.into_inner().appended)
    }

    /// The fast path of one send: appends `events`, whose outbox rows are `rows`, and returns
    /// the (pts, pts_count) that `user_id`'s event got; (0, 0) when svc-updates did not
    /// answer: the relay delivers later and the client catches up with getDifference.
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

    /// The fast path of many sends at once: what each event got, or nothing when svc-updates
    /// did not answer.
    pub async fn fast_path_all(
        &self,
        outbox: &Outbox,
        events: Vec<UserEvent>,
        rows: &[i64],
    ) -> Vec<Appended> {
        outbox
            .deliver_now(TO_UPDATES, rows, self.append(events))
            .await
            .unwrap_or_default()
    }
}

impl Destination for ToUpdates {
    const NAME: &'static str = TO_UPDATES;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        self.append(decode_payloads(batch)?)
            .await
            .map_err(oxigram_kit::refused)?;
        Ok(())
    }
}
