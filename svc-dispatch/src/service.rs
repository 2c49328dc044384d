//! The Dispatch gRPC service: the idempotent receiver of push jobs.

use oxigram_errors::{Error, ErrorCode};
use oxigram_outbox::{FastPath, NewRow, Outbox};
use oxigram_proto::dispatch::v1::{EnqueueRequest, EnqueueResponse, dispatch_server::Dispatch};
use prost::Message as _;
use sqlx::PgPool;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::outbound::TO_GATEWAYS;

/// Most jobs one Enqueue may carry.
pub const MAX_JOBS: usize = 1000;
// Every outbox delivery to this service must fit in one call.
const _: () = assert!(MAX_JOBS >= oxigram_outbox::MAX_CALL);

pub struct DispatchService {
    pool: PgPool,
    outbox: Outbox,
    to_gateways: FastPath,
}

impl DispatchService {
    pub fn new(pool: PgPool, outbox: Outbox, to_gateways: FastPath) -> Self {
        Self {
            pool,
            outbox,
            to_gateways,
        }
    }
}

#[tonic::async_trait]
impl Dispatch for DispatchService {
    async fn enqueue(
        &self,
        request: Request<EnqueueRequest>,
    ) -> Result<Response<EnqueueResponse>, Status> {
        let jobs = request.into_inner().jobs;
        if jobs.len() > MAX_JOBS {
            return Err(Error::new(ErrorCode::LimitInvalid, "too many jobs").into());
        }
        let mut parsed = Vec::with_capacity(jobs.len());
        for job in jobs {
            let id = Uuid::parse_str(&job.event_id).map_err(|_| {
                Status::from(Error::new(
                    ErrorCode::RandomIdInvalid,
                    "event_id is not a UUID",
                ))
            })?;
            parsed.push((id, job));
        }
        let ids: Vec<Uuid> = parsed.iter().map(|(id, _)| *id).collect();
        let mut tx = self.pool.begin().await.map_err(Error::from)?;
        let fresh = oxigram_outbox::first_deliveries(&mut tx, &ids)
            .await
            .map_err(Error::from)?;
        let rows: Vec<NewRow> = parsed
            .into_iter()
            .filter(|(id, _)| fresh.contains(id))
            .map(|(id, job)| NewRow::new(TO_GATEWAYS, id, job.encode_to_vec()))
            .collect();
        let ids = self
            .outbox
            .enqueue(&mut tx, &rows)
            .await
            .map_err(Error::from)?;
        tx.commit().await.map_err(Error::from)?;
        let accepted = rows.len() as i32;
        // Stored: the push goes out now, beside the answer; the relay covers a failure.
        self.to_gateways.hand_off(ids, rows);
        Ok(Response::new(EnqueueResponse { accepted }))
    }
}
