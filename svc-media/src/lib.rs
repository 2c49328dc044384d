//! svc-media: chunked uploads (parts stored as they arrive), files deduplicated by the SHA-256
//! of their content, per-owner file references, and ranged downloads. Blobs sit behind
//! [`blobs::BlobStore`]; local files by default.

pub mod blobs;
mod service;
pub mod store;

use std::sync::Arc;

use oxigram_kit::{Config, GrpcServer, startup};
use oxigram_proto::internal::v1::media_server::MediaServer;
use tokio_util::sync::CancellationToken;

pub use service::MediaService;

/// This service's Postgres schema.
pub const SCHEMA: &str = "media";

/// The service's migrations, applied into [`SCHEMA`] at start-up (and by store tests).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs svc-media until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let me = &config.services.media;
    let server = GrpcServer::bind("media", me).await?;
    let pool =
        oxigram_storage::connect_lazy(&config.database_url_for(me)?, SCHEMA, config.db_pool_size)?;
    let service = MediaService::new(pool.clone(), blobs::LocalBlobs::new(&config.media.blob_dir));
    let readiness = server.readiness();
    let background = {
        let shutdown = shutdown.clone();
        startup::become_ready(readiness, pool, SCHEMA, &MIGRATOR, vec![], shutdown)
    };
    let routes = tonic::service::Routes::new(MediaServer::new(service));
    tokio::try_join!(server.serve(routes, shutdown.clone()), background)?;
    Ok(())
}
