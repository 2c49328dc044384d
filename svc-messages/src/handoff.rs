//! The hand-offs of message events: to svc-updates (which assigns pts) and to svc-dialogs.
//! Both receivers deduplicate by event id, so the fast path and the relay may overlap.

use oxigram_kit::GrpcChannel;
use oxigram_outbox::{Destination, OutboxMessage};
use oxigram_proto::{
    internal::v1::{
        AppendRequest, Appended, ApplyEventsRequest, dialogs_client::DialogsClient,
        updates_client::UpdatesClient,
    },
    types::v1::UserEvent,
};
use prost::Message as _;
use uuid::Uuid;

/// The id of the new-message event of one owner's box: derived, so a replayed send finds the
/// pts its first attempt got.
pub fn new_message_event_id(body_id: i64, owner_id: i64) -> Uuid {
    // High half: a tag ("msg" + 0) and the body; low half: the owner.
    Uuid::from_u64_pair(0x6d73_6700_0000_0000 ^ body_id as u64, owner_id as u64)
}

fn decode(batch: &[OutboxMessage]) -> Result<Vec<UserEvent>, String> {
    batch
        .iter()
        .map(|m| UserEvent::decode(m.payload.as_slice()).map_err(|e| e.to_string()))
        .collect()
}

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
}

impl Destination for ToUpdates {
    const NAME: &'static str = crate::TO_UPDATES;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), String> {
        self.append(decode(batch)?)
            .await
            .map_err(|s| s.to_string())?;
        Ok(())
    }
}

pub struct ToDialogs {
    client: DialogsClient<GrpcChannel>,
}

impl ToDialogs {
    pub fn new(channel: GrpcChannel) -> Self {
        Self {
            client: DialogsClient::new(channel),
        }
    }
}

impl Destination for ToDialogs {
    const NAME: &'static str = crate::TO_DIALOGS;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), String> {
        self.client
            .clone()
            .apply_events(ApplyEventsRequest {
                events: decode(batch)?,
            })
            .await
            .map_err(|s| s.to_string())?;
        Ok(())
    }
}
