//! Everything svc-gateway sends to other services: the calls that answer the client API, to
//! the domain services it composes (svc-messages, svc-updates, svc-dialogs, svc-media), each
//! through its generated client; and the updates of a user's own changes to what the gateway
//! owns (her profile, privacy rules and contacts), events for her log written to this
//! service's outbox in the transaction that made them, handed on to svc-updates right after
//! commit, with the relay delivering whatever that missed. svc-updates deduplicates by event
//! id.

use oxigram_kit::{Config, GrpcChannel};
use oxigram_outbox::{Destination, NewRow, Outbox, OutboxMessage, Refused, decode_payloads};
use oxigram_proto::{
    dialogs::v1::dialogs_client::DialogsClient,
    media::v1::media_client::MediaClient,
    messages::v1::messages_client::MessagesClient,
    types::v1::UserEvent,
    updates::v1::{AppendRequest, AppendResponse, updates_client::UpdatesClient},
};
use prost::Message as _;
use uuid::Uuid;

/// The outbox destination of the events for svc-updates.
pub const TO_UPDATES: &str = "updates";

/// A client of each service the gateway calls.
pub struct Outbound {
    pub messages: MessagesClient<GrpcChannel>,
    pub updates: UpdatesClient<GrpcChannel>,
    pub dialogs: DialogsClient<GrpcChannel>,
    pub media: MediaClient<GrpcChannel>,
}

impl Outbound {
    /// The clients, each with the internal calls' deadline; none connects before its first call.
    pub fn connect(config: &Config) -> anyhow::Result<Self> {
        let (s, timeout) = (&config.services, config.rpc_timeout());
        Ok(Self {
            messages: MessagesClient::new(oxigram_kit::channel(&s.messages.endpoint, timeout)?),
            updates: UpdatesClient::new(oxigram_kit::channel(&s.updates.endpoint, timeout)?),
            dialogs: DialogsClient::new(oxigram_kit::channel(&s.dialogs.endpoint, timeout)?),
            media: MediaClient::new(oxigram_kit::channel(&s.media.endpoint, timeout)?),
        })
    }

    /// The services the gateway waits for before it serves, and where they are.
    pub fn dependencies(config: &Config) -> Vec<(&'static str, String)> {
        let s = &config.services;
        vec![
            ("messages", s.messages.endpoint.clone()),
            ("updates", s.updates.endpoint.clone()),
            ("dialogs", s.dialogs.endpoint.clone()),
            ("media", s.media.endpoint.clone()),
        ]
    }
}

/// The outbox row of an event for svc-updates, whose id is `event_id`.
pub fn row(event_id: Uuid, event: &UserEvent) -> NewRow {
    NewRow::new(TO_UPDATES, event_id, event.encode_to_vec())
}

/// The way to svc-updates for the events of this service's outbox: the relay's destination
/// and the fast path.
#[derive(Clone)]
pub struct ToUpdates {
    client: UpdatesClient<GrpcChannel>,
}

impl ToUpdates {
    pub fn new(client: UpdatesClient<GrpcChannel>) -> Self {
        Self { client }
    }

    async fn append(&self, events: Vec<UserEvent>) -> Result<AppendResponse, tonic::Status> {
        Ok(self
            .client
            .clone()
            .append(AppendRequest { events })
            .await?
            .into_inner())
    }

    /// Hands `events`, whose outbox rows are `rows`, on at once and waits for svc-updates to
    /// log them: their pts. `None` when it did not answer: the relay delivers them later.
    pub async fn fast_path(
        &self,
        outbox: &Outbox,
        events: Vec<UserEvent>,
        rows: &[i64],
    ) -> Option<AppendResponse> {
        outbox
            .deliver_now(TO_UPDATES, rows, self.append(events))
            .await
    }
}

impl Destination for ToUpdates {
    const NAME: &'static str = TO_UPDATES;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        self.append(decode_payloads(batch)?)
            .await
            .map(|_| ())
            .map_err(oxigram_kit::refused)
    }
}
