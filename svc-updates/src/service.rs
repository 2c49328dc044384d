//! The Updates gRPC service.

use oxigram_errors::{Error, ErrorCode, status};
use oxigram_outbox::Outbox;
use oxigram_proto::{
    types::v1::{Difference, UpdatesState, UserEvent},
    updates::v1::{
        AppendReadRequest, AppendReadResponse, AppendRequest, AppendResponse, GetDifferenceRequest,
        GetStateRequest, updates_server::Updates,
    },
};
use sqlx::PgPool;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::{
    batcher::Batcher,
    log::{self, ValidEvent},
    outbound::HandOffs,
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
    outbox: Outbox,
    hand_offs: HandOffs,
    batcher: Batcher,
}

impl UpdatesService {
    /// `workers` transactions may run at once, each taking every append queued meanwhile.
    pub fn new(
        pool: PgPool,
        outbox: Outbox,
        hand_offs: HandOffs,
        retain_per_user: u32,
        workers: usize,
    ) -> Self {
        Self {
            batcher: Batcher::start(
                pool.clone(),
                outbox.clone(),
                hand_offs.clone(),
                retain_per_user.max(1),
                workers,
            ),
            pool,
            outbox,
            hand_offs,
        }
    }
}

/// Checks one event at the boundary.
fn valid_event(event: UserEvent, traceparent: Option<String>) -> Result<ValidEvent, Status> {
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
    Ok(ValidEvent {
        event_id,
        event,
        traceparent,
    })
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
        let valid = events
            .into_iter()
            .map(|e| valid_event(e, traceparent.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let appended = self.batcher.append(valid).await.map_err(Error::internal)?;
        Ok(Response::new(AppendResponse { appended }))
    }

    async fn append_read(
        &self,
        request: Request<AppendReadRequest>,
    ) -> Result<Response<AppendReadResponse>, Status> {
        let r = request.into_inner();
        let event_id = Uuid::parse_str(&r.event_id)
            .map_err(|_| status(ErrorCode::RandomIdInvalid, "event_id is not a UUID"))?;
        if r.user_id <= 0 || r.peer_user_id <= 0 {
            return Err(status(
                ErrorCode::UserIdInvalid,
                "user ids must be positive",
            ));
        }
        if r.basis_pts < 0 || r.still_unread_count < 0 || r.max_id < 0 || r.requested_max_id < 0 {
            return Err(status(
                ErrorCode::PtsInvalid,
                "pts, ids and counts must not be negative",
            ));
        }
        let read = log::ReadRequest {
            event_id,
            user_id: r.user_id,
            peer_user_id: r.peer_user_id,
            basis_pts: r.basis_pts,
            read_max_id: r.read_max_id,
            max_id: r.max_id,
            still_unread_count: r.still_unread_count,
            requested_max_id: r.requested_max_id,
            date: r.date,
            origin_auth_key_id: r.origin_auth_key_id,
            traceparent: oxigram_telemetry::propagation::current_traceparent(),
        };
        let outcome = log::append_read(&self.pool, &self.outbox, &read)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(match outcome {
            log::ReadOutcome::Appended { pts, written } => {
                self.hand_offs.hand_off(written);
                AppendReadResponse {
                    appended: true,
                    pts,
                    recount: false,
                }
            }
            log::ReadOutcome::Unchanged { pts } => AppendReadResponse {
                appended: false,
                pts,
                recount: false,
            },
            log::ReadOutcome::Recount { pts } => AppendReadResponse {
                appended: false,
                pts,
                recount: true,
            },
            log::ReadOutcome::BasisTooOld => {
                return Err(status(
                    ErrorCode::Unavailable,
                    "dialogs are far behind the update log; retry",
                ));
            }
        }))
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
    ) -> Result<Response<Difference>, Status> {
        let GetDifferenceRequest { user_id, request } = request.into_inner();
        let req = request.unwrap_or_default();
        if req.pts < 0 {
            return Err(status(ErrorCode::PtsInvalid, "pts must not be negative"));
        }
        let limit =
            oxigram_errors::page_limit(req.limit, DEFAULT_DIFFERENCE_LIMIT, MAX_DIFFERENCE_LIMIT)?;
        let log::Difference {
            state,
            trimmed_pts,
            updates,
        } = log::difference(&self.pool, user_id, req.pts, limit)
            .await
            .map_err(Error::from)?;
        if req.pts < trimmed_pts {
            return Ok(Response::new(Difference {
                state: Some(state),
                too_long: true,
                ..Default::default()
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
        // The messages the updates name are svc-messages': the gateway adds them.
        Ok(Response::new(Difference {
            updates,
            state: Some(state),
            is_slice,
            ..Default::default()
        }))
    }
}
