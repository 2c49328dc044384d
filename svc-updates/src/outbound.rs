//! Everything svc-updates sends to other services, after logging events: push jobs to
//! svc-dispatch, and the logged events with their pts to svc-dialogs, which keeps each user's
//! dialogs as a projection of her log, applied in pts order. Both are outbox destinations,
//! their rows written in the append's transaction (each event's rows keep its event id, so
//! both receivers deduplicate); right after commit a fast path delivers each at once.

use std::{sync::Arc, time::Duration};

use oxigram_kit::GrpcChannel;
use oxigram_outbox::{
    Destination, FastPath, NewRow, Outbox, OutboxMessage, Refused, decode_payloads,
};
use oxigram_proto::{
    dialogs::v1::{ApplyEventsRequest, dialogs_client::DialogsClient},
    dispatch::v1::{EnqueueRequest, dispatch_client::DispatchClient},
    types::v1::PushJob,
};

/// Outbox destination of push jobs.
pub const TO_DISPATCH: &str = "dispatch";
/// Outbox destination of the logged events svc-dialogs applies.
pub const TO_DIALOGS: &str = "dialogs";

/// The post-commit fast paths of both destinations.
#[derive(Clone)]
pub struct HandOffs {
    to_dispatch: FastPath,
    to_dialogs: FastPath,
}

impl HandOffs {
    /// Starts both delivery loops, each lingering for larger batches.
    pub fn start(
        outbox: &Outbox,
        (to_dispatch, dispatch_linger): (Arc<ToDispatch>, Duration),
        (to_dialogs, dialogs_linger): (Arc<ToDialogs>, Duration),
    ) -> Self {
        Self {
            to_dispatch: FastPath::start(outbox.clone(), to_dispatch, dispatch_linger),
            to_dialogs: FastPath::start(outbox.clone(), to_dialogs, dialogs_linger),
        }
    }

    /// Hands committed rows (with the outbox id of each) to the destination each is for.
    pub fn hand_off(&self, written: (Vec<i64>, Vec<NewRow>)) {
        let (ids, rows) = written;
        let (mut dispatch, mut dialogs) = ((vec![], vec![]), (vec![], vec![]));
        for (id, row) in ids.into_iter().zip(rows) {
            let to = if row.destination == TO_DIALOGS {
                &mut dialogs
            } else {
                &mut dispatch
            };
            to.0.push(id);
            to.1.push(row);
        }
        if !dispatch.0.is_empty() {
            self.to_dispatch.hand_off(dispatch.0, dispatch.1);
        }
        if !dialogs.0.is_empty() {
            self.to_dialogs.hand_off(dialogs.0, dialogs.1);
        }
    }
}

/// Hands push jobs to svc-dispatch (which deduplicates them by event id).
pub struct ToDispatch {
    client: DispatchClient<GrpcChannel>,
}

impl ToDispatch {
    pub fn new(channel: GrpcChannel) -> Self {
        Self {
            client: DispatchClient::new(channel),
        }
    }
}

impl Destination for ToDispatch {
    const NAME: &'static str = TO_DISPATCH;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        let jobs: Vec<PushJob> = decode_payloads(batch)?;
        self.client
            .clone()
            .enqueue(EnqueueRequest { jobs })
            .await
            .map_err(oxigram_kit::refused)?;
        Ok(())
    }
}

/// Hands logged events to svc-dialogs, which applies each user's in pts order.
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
    const NAME: &'static str = TO_DIALOGS;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        self.client
            .clone()
            .apply_events(ApplyEventsRequest {
                events: decode_payloads(batch)?,
            })
            .await
            .map_err(oxigram_kit::refused)?;
        Ok(())
    }
}
