//! What the store benchmarks share: their flags, percentiles, and a migrated database of
//! their own that is dropped after the run, whether or not it went through (a benchmark's
//! database is large).

use std::{future::Future, time::Duration};

use anyhow::Context;
use sqlx::migrate::Migrator;

use crate::store::{Migrated, migrated};

/// The value of `--name N` on the command line, or `default`.
pub fn flag(name: &str, default: usize) -> anyhow::Result<usize> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => Ok(args.get(i + 1).context("a value")?.parse()?),
        None => Ok(default),
    }
}

/// The `p` quantile (0..=1) of ascending, non-empty latencies.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Runs `measure` on a fresh database holding `schema` migrated by `migrators`, then drops
/// the database.
pub async fn on_fresh_database<F, Fut>(
    schema: &'static str,
    migrators: &[&'static Migrator],
    measure: F,
) -> anyhow::Result<()>
where
    F: FnOnce(Migrated) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let db = migrated(schema, migrators).await?;
    let (url, pool) = (db.url.clone(), db.pool.clone());
    let measured = measure(db).await;
    let (server, name) = url.rsplit_once('/').context("database url")?;
    pool.close().await;
    let name = name.split('?').next().unwrap_or(name).to_owned();
    let admin = sqlx::PgPool::connect(&format!("{server}/postgres")).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE \"{name}\" WITH (FORCE)"
    )))
    .execute(&admin)
    .await?;
    measured
}
