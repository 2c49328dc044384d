//! Everything svc-dialogs sends to other services. One arrow, to svc-updates, carrying:
//! - a read, logged in the reader's log while her log is where the read counted it
//!   (`AppendRead`, a call the read awaits: its answer is the read's pts);
//! - the sender's side of a read (her messages read, for her log), made when the read is
//!   applied here, and delivery receipts (DELIVERED): events for other users' logs, written to
//!   this service's outbox in the transaction that made them, handed on right after commit,
//!   with the relay delivering whatever that missed. svc-updates deduplicates by event id;
//! - a message the owner sent clears her draft of its dialog: the draft-cleared event, for
//!   her own log, travels like the sender's side of a read;
//! - a change of the owner's dialog settings: one event for her log, written to the outbox
//!   and handed on at once, the call waiting for its pts (`ToUpdates::log`).

use oxigram_kit::GrpcChannel;
use oxigram_outbox::{Destination, NewRow, Outbox, OutboxMessage, Refused, decode_payloads};
use oxigram_proto::{
    types::v1::UserEvent,
    updates::v1::{
        AppendReadRequest, AppendReadResponse, AppendRequest, updates_client::UpdatesClient,
    },
};
use prost::Message as _;
use uuid::Uuid;

/// The outbox destination of the events for svc-updates.
pub const TO_UPDATES: &str = "updates";

/// Tells the id of a read's sender-side event from the read's own ("readout").
const READ_OUTBOX_TAG: u128 = 0x0072_6561_646f_7574;

/// Tells the id of a draft-cleared event from the id of the sent message's event ("drafted").
const DRAFT_CLEARED_TAG: u128 = 0x0064_7261_6674_6564;

/// The id of the draft-cleared event a sent message makes: derived from the message's event,
/// so applying the message again makes the same event.
pub fn draft_cleared_event_id(message_event: Uuid) -> Uuid {
    Uuid::from_u128(message_event.as_u128() ^ DRAFT_CLEARED_TAG)
}

/// The id of the sender's side of a read: derived from the read's, so applying the read again
/// makes the same event.
pub fn read_outbox_event_id(read: Uuid) -> Uuid {
    Uuid::from_u128(read.as_u128() ^ READ_OUTBOX_TAG)
}

/// The outbox row of an event for svc-updates, whose id is `event_id`.
pub fn row(event_id: Uuid, event: &UserEvent) -> NewRow {
    NewRow::new(TO_UPDATES, event_id, event.encode_to_vec())
}

/// The way to svc-updates: the relay's destination, the fast path and the reads' call.
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

    async fn append(&self, events: Vec<UserEvent>) -> Result<(), tonic::Status> {
        self.client.clone().append(AppendRequest { events }).await?;
        Ok(())
    }

    /// Hands `events`, whose outbox rows are `rows`, on at once and answers the pts each got
    /// (by event id); `None` when svc-updates did not answer (the relay delivers them later).
    pub async fn log(
        &self,
        outbox: &Outbox,
        events: Vec<UserEvent>,
        rows: &[i64],
    ) -> Option<Vec<oxigram_proto::updates::v1::Appended>> {
        outbox
            .deliver_now(TO_UPDATES, rows, async {
                Ok::<_, tonic::Status>(
                    self.client
                        .clone()
                        .append(AppendRequest { events })
                        .await?
                        .into_inner()
                        .appended,
                )
            })
            .await
    }

    /// Logs a read counted as of the reader's log up to `r.basis_pts`.
    pub async fn append_read(
        &self,
        r: AppendReadRequest,
    ) -> Result<AppendReadResponse, tonic::Status> {
        Ok(self.client.clone().append_read(r).await?.into_inner())
    }

    /// Hands `events`, whose outbox rows are `rows`, on at once and waits for svc-updates to
    /// take them; when it does not answer, the relay delivers them later.
    pub async fn fast_path(&self, outbox: &Outbox, events: Vec<UserEvent>, rows: &[i64]) {
        outbox
            .deliver_now(TO_UPDATES, rows, self.append(events))
            .await;
    }
}

impl Destination for ToUpdates {
    const NAME: &'static str = TO_UPDATES;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        self.append(decode_payloads(batch)?)
            .await
            .map_err(oxigram_kit::refused)
    }
}
