//! The hand-off of message events to svc-dialogs (the one to svc-updates is the shared
//! `oxigram_kit::to_updates`), and the ids of those events.

use oxigram_kit::GrpcChannel;
use oxigram_kit::to_updates::decode_events;
use oxigram_outbox::{Destination, OutboxMessage, Refused};
use oxigram_proto::internal::v1::{ApplyEventsRequest, dialogs_client::DialogsClient};
use uuid::Uuid;

/// The id of the new-message event of one owner's box: derived, so a replayed send finds the
/// pts its first attempt got.
pub fn new_message_event_id(body_id: i64, owner_id: i64) -> Uuid {
    // High half: a tag ("msg" + 0) and the body; low half: the owner.
    Uuid::from_u64_pair(0x6d73_6700_0000_0000 ^ body_id as u64, owner_id as u64)
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

    /// A client of svc-dialogs on the same channel, for the calls that go through this service.
    pub fn client(&self) -> DialogsClient<GrpcChannel> {
        self.client.clone()
    }
}

impl Destination for ToDialogs {
    const NAME: &'static str = crate::TO_DIALOGS;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        self.client
            .clone()
            .apply_events(ApplyEventsRequest {
                events: decode_events(batch)?,
            })
            .await
            .map_err(oxigram_kit::refused)?;
        Ok(())
    }
}
