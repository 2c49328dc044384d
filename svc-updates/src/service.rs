//! The Updates gRPC service and the outbox destination that hands push jobs to svc-dispatch.

use oxigram_errors::{Error, ErrorCode, status};
use oxigram_kit::GrpcChannel;
use oxigram_outbox::{Destination, FastPath, Outbox, OutboxMessage, Refused};
use oxigram_proto::{
    internal::v1::{
        AppendRequest, AppendResponse, EnqueueRequest, GetDifferenceRequest, GetDifferenceResponse,
        GetStateRequest, dispatch_client::DispatchClient, updates_server::Updates,
    },
    types::v1::{PushJob, UpdatesState},
};
use prost::Message as _;
use sqlx::PgPool;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::{
    batcher::Batcher,
    log::{self, ValidEvent},
};

/// Most events one Append may carry.
pub const MAX_APPEND_BATCH: usize = 1000;
// Every outbox delivery to this service must fit in one call.
const _: () = assert!(MAX_APPEND_BATCH >= oxigram_outbox::MAX_CALL);
/// Most updates one difference slice returns.
pub const MAX_DIFFERENCE_LIMIT: i32 = 1000;
/// The slice size when the caller gives none.
pub const DEFAULT_DIFFERENCE_LIMIT: i32 = 100;

pub struct UpdatesService {
    pool: PgPool,
    batcher: Batcher,
}

impl UpdatesService {
    /// `workers` transactions may run at once, each taking every append queued meanwhile.
    pub fn new(
        pool: PgPool,
        outbox: Outbox,
        to_dispatch: FastPath,
        retain_per_user: u32,
        workers: usize,
    ) -> Self {
        Self {
            batcher: Batcher::start(
                pool.clone(),
                outbox,
                to_dispatch,
                retain_per_user.max(1),
                workers,
            ),
            pool,
        }
    }
}

#[tonic::async_trait]
impl Updates for UpdatesService {
    async fn append(
        &self,
        request: Request<AppendRequest>,
    ) -> Result<Response<AppendResponse>, Status> {
        let events = request.into_inner().events;
        if events.len() > MAX_APPEND_BATCH {
            return Err(status(
                ErrorCode::LimitInvalid,
                "too many events in one append",
            ));
        }
        let traceparent = oxigram_telemetry::propagation::current_traceparent();
        let mut valid = Vec::with_capacity(events.len());
        for event in events {
            let event_id = Uuid::parse_str(&event.event_id)
                .map_err(|_| status(ErrorCode::RandomIdInvalid, "event_id is not a UUID"))?;
            if event.user_id <= 0 {
                return Err(status(ErrorCode::UserIdInvalid, "user_id must be positive"));
            }
            if !(1..=1000).contains(&event.pts_count) {
                return Err(status(
                    ErrorCode::PtsInvalid,
                    "pts_count must be within 1..=1000",
                ));
            }
            if event
                .update
                .as_ref()
                .and_then(|u| u.kind.as_ref())
                .is_none()
            {
                return Err(status(ErrorCode::PtsInvalid, "event carries no update"));
            }
            valid.push(ValidEvent {
                event_id,
                event,
                traceparent: traceparent.clone(),
            });
        }
        let appended = self.batcher.append(valid).await.map_err(Error::internal)?;
        Ok(Response::new(AppendResponse { appended }))
    }

    async fn get_state(
        &self,
        request: Request<GetStateRequest>,
    ) -> Result<Response<UpdatesState>, Status> {
        let (state, _) = log::state(&self.pool, request.into_inner().user_id)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(state))
    }

    async fn get_difference(
        &self,
        request: Request<GetDifferenceRequest>,
    ) -> Result<Response<GetDifferenceResponse>, Status> {
        let req = request.into_inner();
        if req.pts < 0 {
            return Err(status(ErrorCode::PtsInvalid, "pts must not be negative"));
        }
        let limit =
            oxigram_errors::page_limit(req.limit, DEFAULT_DIFFERENCE_LIMIT, MAX_DIFFERENCE_LIMIT)?;
        let log::Difference {
            state,
            trimmed_pts,
            updates,
        } = log::difference(&self.pool, req.user_id, req.pts, limit)
            .await
            .map_err(Error::from)?;
        if req.pts < trimmed_pts {
            return Ok(Response::new(GetDifferenceResponse {
                updates: vec![],
                state: Some(state),
                is_slice: false,
                too_long: true,
            }));
        }
        // The state and the updates come from one snapshot: the last update is never past
        // the state, and a slice ends the state the client continues from at its last update.
        let last = updates.last().map_or(req.pts, |u| u.pts);
        let is_slice = last < state.pts;
        let state = if is_slice {
            UpdatesState {
                pts: last,
                date: state.date,
            }
        } else {
            state
        };
        Ok(Response::new(GetDifferenceResponse {
            updates,
            state: Some(state),
            is_slice,
            too_long: false,
        }))
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
    const NAME: &'static str = crate::TO_DISPATCH;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        let jobs = batch
            .iter()
            .map(|m| {
                PushJob::decode(m.payload.as_slice()).map_err(|e| Refused::permanent(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.client
            .clone()
            .enqueue(EnqueueRequest { jobs })
            .await
            .map_err(oxigram_kit::refused)?;
        Ok(())
    }
}
