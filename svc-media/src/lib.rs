//! svc-media: chunked uploads (parts stored as they arrive), files deduplicated by the SHA-256
//! of their content, per-owner file references, and ranged downloads. Blobs sit behind
//! [`blobs::BlobStore`]; local files by default. It sends nothing to other services, so it has
//! no `outbound` module.

pub mod blobs;
mod service;
pub mod store;

use std::sync::Arc;

use oxigram_kit::{Config, startup::Starting};
use oxigram_proto::media::v1::media_server::MediaServer;
use tokio_util::sync::CancellationToken;

pub use service::MediaService;

/// This service's Postgres schema.
pub const SCHEMA: &str = "media";

/// The service's migrations, applied into [`SCHEMA`] at start-up (and by store tests).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs svc-media until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let start = Starting::bind(&config, "media", &config.services.media, SCHEMA, &MIGRATOR).await?;
    let service = MediaService::new(
        start.pool.clone(),
        blobs::LocalBlobs::new(&config.media.blob_dir),
    );
    let routes = tonic::service::Routes::new(MediaServer::new(service));
    start.serve(routes, vec![], async {}, shutdown).await
}
