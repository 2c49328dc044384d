//! What svc-messages' store benchmarks share: the flags, percentiles and fresh database of
//! every store benchmark (`oxigram_testkit::bench`), on svc-messages' schema.

use std::future::Future;

use oxigram_testkit::store::Migrated;

pub use oxigram_testkit::bench::{flag, percentile};

/// Runs `measure` on a fresh database of svc-messages' schema, then drops the database.
pub async fn on_fresh_database<F, Fut>(measure: F) -> anyhow::Result<()>
where
    F: FnOnce(Migrated) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    oxigram_testkit::bench::on_fresh_database(
        svc_messages::SCHEMA,
        &[&svc_messages::MIGRATOR, &oxigram_outbox::MIGRATOR],
        measure,
    )
    .await
}
