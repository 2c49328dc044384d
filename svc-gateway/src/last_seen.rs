//! The SQL of last seen: each user's last time online, kept when she goes offline.

use std::collections::HashMap;

use sqlx::PgPool;

#[derive(sqlx::FromRow)]
struct LastSeenRow {
    user_id: i64,
    was_online: i64,
}

/// Records that `user_id` went offline at `at_ms` (Unix milliseconds); a later time never
/// gives way to an earlier one (primary key of last_seen).
pub async fn record(pool: &PgPool, user_id: i64, at_ms: i64) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/record_last_seen.sql"))
        .bind(user_id)
        .bind(at_ms)
        .execute(pool)
        .await?;
    Ok(())
}

/// The last time online (Unix seconds) of those of `user_ids` who have one (primary key of
/// last_seen).
pub async fn of(pool: &PgPool, user_ids: &[i64]) -> Result<HashMap<i64, i64>, sqlx::Error> {
    let rows: Vec<LastSeenRow> = sqlx::query_as(include_str!("../sql/last_seen.sql"))
        .bind(user_ids)
        .fetch_all(pool)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.user_id, r.was_online))
        .collect())
}
