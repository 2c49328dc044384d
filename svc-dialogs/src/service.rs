//! The Dialogs gRPC service.

use oxigram_errors::{Error, ErrorCode, status};
use oxigram_outbox::{FastPath, Outbox};
use oxigram_proto::{
    dialogs::v1::{
        ApplyEventsRequest, ApplyEventsResponse, GetDialogsRequest, GetDialogsResponse,
        GetOutboxReadDateRequest, ReadHistoryRequest, ReceivedMessagesRequest,
        dialogs_server::Dialogs,
    },
    require_peer,
    types::v1::{AffectedMessages, OutboxReadDate, Peer, ReceivedMessagesResponse},
};
use sqlx::PgPool;
use tonic::{Request, Response, Status};

use crate::{
    outbound::ToUpdates,
    projection,
    read::{self, Read},
    store,
};

/// Most dialogs one page returns.
pub const MAX_DIALOGS_LIMIT: i32 = 100;
/// Most events one ApplyEvents may carry.
pub const MAX_EVENTS: usize = 1000;
// Every outbox delivery to this service must fit in one call.
const _: () = assert!(MAX_EVENTS >= oxigram_outbox::MAX_CALL);

pub struct DialogsService {
    pool: PgPool,
    outbox: Outbox,
    to_updates: ToUpdates,
    /// Events that applying the log makes for other users' logs, handed on after commit.
    derived: FastPath,
}

impl DialogsService {
    pub fn new(pool: PgPool, outbox: Outbox, to_updates: ToUpdates, derived: FastPath) -> Self {
        Self {
            pool,
            outbox,
            to_updates,
            derived,
        }
    }
}

#[tonic::async_trait]
impl Dialogs for DialogsService {
    async fn apply_events(
        &self,
        request: Request<ApplyEventsRequest>,
    ) -> Result<Response<ApplyEventsResponse>, Status> {
        let events = request.into_inner().events;
        if events.len() > MAX_EVENTS {
            return Err(status(ErrorCode::LimitInvalid, "too many events"));
        }
        for e in &events {
            if uuid::Uuid::parse_str(&e.event_id).is_err() {
                return Err(status(ErrorCode::RandomIdInvalid, "event_id is not a UUID"));
            }
            if e.pts < e.pts_count || e.pts_count < 1 {
                return Err(status(
                    ErrorCode::PtsInvalid,
                    "an event to apply carries the pts its log gave it",
                ));
            }
        }
        let applied = projection::apply(&self.pool, &self.outbox, events)
            .await
            .map_err(Error::from)?;
        let (ids, rows) = applied.derived;
        if !ids.is_empty() {
            self.derived.hand_off(ids, rows);
        }
        if applied.held > 0 {
            // The outbox delivers them again, once the events before them are here.
            return Err(status(
                ErrorCode::Unavailable,
                "events ahead of a gap in their user's pts wait for the missing ones",
            ));
        }
        Ok(Response::new(ApplyEventsResponse {
            applied: applied.applied,
        }))
    }

    async fn get_dialogs(
        &self,
        request: Request<GetDialogsRequest>,
    ) -> Result<Response<GetDialogsResponse>, Status> {
        let GetDialogsRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        let limit = oxigram_errors::page_limit(r.limit, 20, MAX_DIALOGS_LIMIT)?;
        // The seek key's peer as the previous page gave it; none is 0, which continues after
        // every dialog of that top message date and id.
        let offset_peer = r.offset_peer.as_ref().and_then(Peer::user_id).unwrap_or(0);
        if r.offset_date < 0 || r.offset_id < 0 || offset_peer < 0 {
            return Err(status(
                ErrorCode::OffsetInvalid,
                "offsets must not be negative",
            ));
        }
        let after = if r.offset_date == 0 {
            (i64::MAX, i64::MAX, i64::MAX)
        } else {
            (r.offset_date, r.offset_id, offset_peer)
        };
        let dialogs = store::page(&self.pool, owner_id, after, limit)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(GetDialogsResponse { dialogs }))
    }

    async fn read_history(
        &self,
        request: Request<ReadHistoryRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let ReadHistoryRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        check_max_id(r.max_id)?;
        let read = read::read_history(
            &self.pool,
            &self.outbox,
            &self.to_updates,
            owner_id,
            peer,
            r.max_id,
            auth_key_id,
        )
        .await?;
        Ok(Response::new(match read {
            Read::Unchanged => AffectedMessages {
                pts: 0,
                pts_count: 0,
            },
            Read::Logged { pts } => AffectedMessages { pts, pts_count: 1 },
        }))
    }

    async fn get_outbox_read_date(
        &self,
        request: Request<GetOutboxReadDateRequest>,
    ) -> Result<Response<OutboxReadDate>, Status> {
        let GetOutboxReadDateRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        let date = store::outbox_read_date(&self.pool, owner_id, peer, r.msg_id)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| status(ErrorCode::MessageNotReadYet, "the peer has not read it yet"))?;
        Ok(Response::new(OutboxReadDate { date }))
    }

    async fn received_messages(
        &self,
        request: Request<ReceivedMessagesRequest>,
    ) -> Result<Response<ReceivedMessagesResponse>, Status> {
        let ReceivedMessagesRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        check_max_id(r.max_id)?;
        let (max_id, moved) =
            store::received(&self.pool, &self.outbox, owner_id, auth_key_id, r.max_id)
                .await
                .map_err(Error::from)?;
        if let Some(moved) = moved {
            // The receipts go to the senders, not to the caller: no pts to report back.
            self.to_updates
                .fast_path(&self.outbox, moved.events, &moved.rows)
                .await;
        }
        Ok(Response::new(ReceivedMessagesResponse { max_id }))
    }
}

/// `MESSAGE_ID_INVALID` for a negative `max_id` (0 means "everything so far").
fn check_max_id(max_id: i64) -> Result<(), Status> {
    if max_id < 0 {
        return Err(status(
            ErrorCode::MessageIdInvalid,
            "max_id must not be negative",
        ));
    }
    Ok(())
}
