//! The operator's admin API over one schema's outbox (`oxigram.admin.v1.OutboxAdmin`): the
//! rows the relay kept as failed, and requeueing them. Every service that owns an outbox
//! serves this one implementation when an admin token is configured.

use oxigram_errors::{ErrorCode, status};
use oxigram_proto::admin::v1::{
    FailedOutboxRow, ListFailedOutboxRequest, ListFailedOutboxResponse, RequeueOutboxRequest,
    RequeueOutboxResponse,
    outbox_admin_server::{OutboxAdmin, OutboxAdminServer},
};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use subtle::ConstantTimeEq as _;
use tonic::{Request, Response, Status};

/// Most ids one requeue names, and most rows one page lists.
pub const MAX_ADMIN_IDS: usize = 1000;

/// The operator's token, as every admin API checks it: a bearer token in `authorization`.
#[derive(Clone)]
pub struct AdminToken {
    /// The token's digest: compared digest to digest, a check takes the same time whatever
    /// the presented token's length or first differing byte.
    digest: [u8; 32],
}

impl AdminToken {
    /// `None` when `token` is empty: the admin API is off.
    pub fn new(token: &str) -> Option<Self> {
        (!token.is_empty()).then(|| Self {
            digest: Sha256::digest(token.as_bytes()).into(),
        })
    }

    /// `Ok` when `request` carries the token, `ADMIN_TOKEN_INVALID` otherwise.
    pub fn authorise<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                status(
                    ErrorCode::AdminTokenInvalid,
                    "expected authorization: Bearer <admin token>",
                )
            })?;
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        if bool::from(digest.ct_eq(&self.digest)) {
            Ok(())
        } else {
            Err(status(ErrorCode::AdminTokenInvalid, "wrong admin token"))
        }
    }
}

/// The admin API of the outbox in `pool`'s schema, authorised by one operator token.
pub struct AdminService {
    pool: PgPool,
    token: AdminToken,
}

impl AdminService {
    /// `None` when `token` is empty: the admin API is off.
    pub fn server(pool: PgPool, token: &str) -> Option<OutboxAdminServer<Self>> {
        let token = AdminToken::new(token)?;
        Some(OutboxAdminServer::new(Self { pool, token }))
    }

    fn authorise<T>(&self, request: &Request<T>) -> Result<(), Status> {
        self.token.authorise(request)
    }
}

#[derive(sqlx::FromRow)]
struct FailedRow {
    id: i64,
    destination: String,
    items: i32,
    attempts: i32,
    last_error: String,
    created_at: i64,
}

#[tonic::async_trait]
impl OutboxAdmin for AdminService {
    async fn list_failed_outbox(
        &self,
        request: Request<ListFailedOutboxRequest>,
    ) -> Result<Response<ListFailedOutboxResponse>, Status> {
        self.authorise(&request)?;
        let r = request.into_inner();
        oxigram_errors::check_text("destination", &r.destination)?;
        if r.after_id < 0 {
            return Err(status(
                ErrorCode::OffsetInvalid,
                "after_id must not be negative",
            ));
        }
        let limit = oxigram_errors::page_limit(r.limit, 100, MAX_ADMIN_IDS as i32)?;
        let rows: Vec<FailedRow> = sqlx::query_as(include_str!("../sql/list_failed.sql"))
            .bind(&r.destination)
            .bind(r.after_id)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(oxigram_errors::Error::from)?;
        let next_after_id = if rows.len() == limit as usize {
            rows.last().map_or(0, |row| row.id)
        } else {
            0
        };
        let rows = rows
            .into_iter()
            .map(|row| FailedOutboxRow {
                id: row.id,
                destination: row.destination,
                events: row.items,
                attempts: row.attempts,
                last_error: row.last_error,
                created_at: row.created_at,
            })
            .collect();
        Ok(Response::new(ListFailedOutboxResponse {
            rows,
            next_after_id,
        }))
    }

    async fn requeue_outbox(
        &self,
        request: Request<RequeueOutboxRequest>,
    ) -> Result<Response<RequeueOutboxResponse>, Status> {
        self.authorise(&request)?;
        let r = request.into_inner();
        let moved: i64 = if !r.ids.is_empty() {
            if r.ids.len() > MAX_ADMIN_IDS {
                return Err(status(
                    ErrorCode::LimitInvalid,
                    &format!("at most {MAX_ADMIN_IDS} ids"),
                ));
            }
            sqlx::query_scalar(include_str!("../sql/requeue_ids.sql"))
                .bind(&r.ids)
                .fetch_one(&self.pool)
                .await
        } else {
            oxigram_errors::check_text("destination", &r.destination)?;
            if r.destination.is_empty() {
                return Err(status(
                    ErrorCode::InputRequestInvalid,
                    "name the rows to requeue: ids, or a destination",
                ));
            }
            sqlx::query_scalar(include_str!("../sql/requeue_destination.sql"))
                .bind(&r.destination)
                .fetch_one(&self.pool)
                .await
        }
        .map_err(oxigram_errors::Error::from)?;
        if moved > 0 {
            tracing::info!(rows = moved, "failed outbox rows requeued by an operator");
        }
        Ok(Response::new(RequeueOutboxResponse { requeued: moved }))
    }
}
