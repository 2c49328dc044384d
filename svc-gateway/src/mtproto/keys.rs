//! MTProto auth keys in the gateway's accounts schema (by the primary key of auth_keys, and a
//! permanent key's temporary keys by auth_keys_perm_key).

use sqlx::PgPool;

/// Stores a key auth key creation made, a temporary one with its expiry (unix seconds);
/// `false` when its id is taken.
pub async fn insert(
    pool: &PgPool,
    id: i64,
    secret_hash: &[u8],
    key: &[u8],
    expires_at: Option<i64>,
) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query(
        "INSERT INTO auth_keys (id, secret_hash, mtproto_key, expires_at) VALUES ($1, $2, $3, to_timestamp($4)) ON CONFLICT (id) DO NOTHING",
    )
    .bind(id)
    .bind(secret_hash)
    .bind(key)
    .bind(expires_at.map(|at| at as f64))
    .execute(pool)
    .await?
    .rows_affected()
        == 1)
}

/// The 256 bytes of an unexpired MTProto key, and its expiry (unix seconds) if it is a
/// temporary one.
pub async fn find(pool: &PgPool, id: i64) -> Result<Option<(Vec<u8>, Option<i64>)>, sqlx::Error> {
    let row: Option<(Option<Vec<u8>>, Option<i64>)> = sqlx::query_as(
        "SELECT mtproto_key, extract(epoch FROM expires_at)::bigint FROM auth_keys WHERE id = $1 AND (expires_at IS NULL OR expires_at > now())",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(row.and_then(|(key, expires_at)| key.map(|key| (key, expires_at))))
}

/// Who an unexpired key acts as: itself, or the permanent key it is bound to (id and key
/// bytes); `None` once the key expired or was ended by another binding.
pub async fn acting_key(pool: &PgPool, id: i64) -> Result<Option<(i64, Vec<u8>)>, sqlx::Error> {
    let row: Option<(i64, Option<Vec<u8>>)> = sqlx::query_as(
        "SELECT p.id, p.mtproto_key FROM auth_keys k JOIN auth_keys p ON p.id = coalesce(k.perm_key_id, k.id) WHERE k.id = $1 AND (k.expires_at IS NULL OR k.expires_at > now())",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(row.and_then(|(id, key)| key.map(|key| (id, key))))
}

/// What binding a temporary key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// Bound; these other temporary keys of the permanent key ended.
    Bound { ended: Vec<i64> },
    /// The key is signed in itself or bound to another permanent key.
    Refused,
    /// The key expired or was ended (replaced) since its connection found it.
    Ended,
}

/// Binds a temporary key to a permanent one until `expires_at` (unix seconds), which ends the
/// key if it is earlier than its own expiry, and ends every other temporary key bound to the
/// permanent one (see `sql/bind_temp_key.sql`).
pub async fn bind_temp(
    pool: &PgPool,
    temp_id: i64,
    perm_id: i64,
    expires_at: i32,
) -> Result<Binding, sqlx::Error> {
    let mut tx = pool.begin().await?;
    // Binds to one permanent key take turns on its row (primary key): each then reads the
    // bindings the one before it committed, so two new temporary keys never both stay bound.
    sqlx::query("SELECT FROM auth_keys WHERE id = $1 FOR NO KEY UPDATE")
        .bind(perm_id)
        .execute(&mut *tx)
        .await?;
    let (bound, live, ended): (bool, bool, Vec<i64>) =
        sqlx::query_as(include_str!("../../sql/bind_temp_key.sql"))
            .bind(temp_id)
            .bind(perm_id)
            .bind(f64::from(expires_at))
            .fetch_one(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(match (bound, live) {
        (true, _) => Binding::Bound { ended },
        (false, true) => Binding::Refused,
        (false, false) => Binding::Ended,
    })
}

/// Records the device a key's client named in `initConnection` (what the authorizations list
/// shows); a no-op when it is recorded already.
pub async fn describe(pool: &PgPool, id: i64, device_model: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE auth_keys SET device_model = $2 WHERE id = $1 AND device_model <> $2")
        .bind(id)
        .bind(device_model)
        .execute(pool)
        .await?;
    Ok(())
}
