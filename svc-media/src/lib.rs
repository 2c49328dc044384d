//! svc-media: chunked uploads (parts stored as they arrive), files deduplicated by the SHA-256
//! of their content, per-owner file references, ranged downloads, the snapshot a message keeps
//! of a file (a photo's sizes made here), instant upload by hash and the collector of what no
//! message took. Blobs go through `object_store` ([`blobs::Blobs`]): local files by default,
//! an S3-compatible store by configuration. It sends nothing to other services, so it has no
//! `outbound` module.

pub mod blobs;
mod running_hash;
mod service;
pub mod sizes;
pub mod store;

use std::{sync::Arc, time::Duration};

use oxigram_kit::{Config, startup::Starting};
use oxigram_proto::media::v1::media_server::MediaServer;
use tokio_util::sync::CancellationToken;

pub use service::{
    CHUNK_ALIGN, MAX_CHUNK_BYTES, MAX_PART_BYTES, MAX_PARTS, MediaService, check_range,
};

/// This service's Postgres schema.
pub const SCHEMA: &str = "media";

/// The service's migrations, applied into [`SCHEMA`] at start-up (and by store tests).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs svc-media until `shutdown`.
pub async fn run(config: Arc<Config>, shutdown: CancellationToken) -> anyhow::Result<()> {
    let start = Starting::bind(&config, "media", &config.services.media, SCHEMA, &MIGRATOR).await?;
    let blobs = blobs::Blobs::from_config(&config.media)?;
    let service = Arc::new(MediaService::new(start.pool.clone(), blobs));
    let collector = collect_periodically(
        service.clone(),
        config.media.gc_interval_seconds,
        config.media.gc_grace_seconds,
        shutdown.clone(),
    );
    let routes = tonic::service::Routes::new(MediaServer::from_arc(service));
    start.serve(routes, vec![], collector, shutdown).await
}

/// The collector: one collection every `interval` seconds (none when 0) until `shutdown`.
async fn collect_periodically(
    service: Arc<MediaService>,
    interval: u64,
    grace: i64,
    shutdown: CancellationToken,
) {
    if interval == 0 {
        return;
    }
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(interval)) => {}
        }
        match service.collect(grace).await {
            Ok(done) => tracing::info!(
                parts = done.parts_deleted,
                contents = done.contents_deleted,
                "media collected"
            ),
            Err(err) => tracing::warn!(error = %err, "media collection failed"),
        }
    }
}
