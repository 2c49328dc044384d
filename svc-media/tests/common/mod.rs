//! The fixture both svc-media test binaries start from: the service on a fresh migrated
//! schema, its blobs under a fresh local folder.

use oxigram_testkit::{
    store::{self, Migrated},
    unique_name,
};
use svc_media::{MediaService, blobs::Blobs};

/// A fresh schema with svc-media's migrations (and the outbox's) applied.
pub async fn schema() -> anyhow::Result<Migrated> {
    store::migrated(
        svc_media::SCHEMA,
        &[&svc_media::MIGRATOR, &oxigram_outbox::MIGRATOR],
    )
    .await
}

/// The service on a fresh schema, with its blobs under a fresh folder (removed on drop).
pub struct Service {
    pub media: MediaService,
    pub dir: std::path::PathBuf,
    pub db: Migrated,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The service with local blobs.
pub async fn local() -> anyhow::Result<Service> {
    let db = schema().await?;
    let dir = std::env::temp_dir().join(unique_name("oxigram-media-test"));
    Ok(Service {
        media: MediaService::new(db.pool.clone(), Blobs::local(&dir)?),
        dir,
        db,
    })
}
