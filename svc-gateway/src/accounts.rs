//! The SQL of accounts: users, auth keys and login codes.

use oxigram_proto::types::v1::User;
use sqlx::{PgPool, Row, postgres::PgRow};

fn user_from_row(r: &PgRow) -> Result<User, sqlx::Error> {
    Ok(User {
        id: r.try_get("id")?,
        first_name: r.try_get("first_name")?,
        phone: r.try_get("phone")?,
    })
}

/// A stored auth key (primary key of auth_keys).
pub async fn auth_key(
    pool: &PgPool,
    id: i64,
) -> Result<Option<(Vec<u8>, Option<i64>)>, sqlx::Error> {
    let row = sqlx::query("SELECT secret_hash, user_id FROM auth_keys WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.map(|r| Ok((r.try_get("secret_hash")?, r.try_get("user_id")?)))
        .transpose()
}

/// Stores a new auth key; `false` when the id is taken (the caller draws another).
pub async fn insert_auth_key(
    pool: &PgPool,
    id: i64,
    secret_hash: &[u8],
    device_model: &str,
) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query(
        "INSERT INTO auth_keys (id, secret_hash, device_model) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
    )
    .bind(id)
    .bind(secret_hash)
    .bind(device_model)
    .execute(pool)
    .await?
    .rows_affected()
        == 1)
}

/// Binds (or, with `None`, unbinds) an auth key (primary key of auth_keys).
pub async fn bind_auth_key(
    pool: &PgPool,
    id: i64,
    user_id: Option<i64>,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE auth_keys SET user_id = $2, bound_at = now() WHERE id = $1")
        .bind(id)
        .bind(user_id)
        .execute(pool)
        .await?;
    Ok(())
}

pub async fn insert_login_code(
    pool: &PgPool,
    hash: &str,
    phone: &str,
    code: &str,
    ttl_secs: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO login_codes (phone_code_hash, phone, code, expires_at)
         VALUES ($1, $2, $3, now() + $4 * interval '1 second')",
    )
    .bind(hash)
    .bind(phone)
    .bind(code)
    .bind(ttl_secs)
    .execute(pool)
    .await?;
    Ok(())
}

/// How checking a login code went.
pub enum CodeCheck {
    Valid,
    Invalid,
    Expired,
}

/// Most wrong guesses one login code takes.
const MAX_CODE_ATTEMPTS: i32 = 5;

/// Checks a login code (primary key of login_codes); a valid code is used up.
pub async fn check_login_code(
    pool: &PgPool,
    hash: &str,
    phone: &str,
    code: &str,
) -> Result<CodeCheck, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let row = sqlx::query(
        "SELECT phone, code, attempts, expires_at < now() AS expired FROM login_codes
         WHERE phone_code_hash = $1 FOR UPDATE",
    )
    .bind(hash)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(CodeCheck::Expired);
    };
    let (stored_phone, stored_code): (String, String) =
        (row.try_get("phone")?, row.try_get("code")?);
    let attempts: i32 = row.try_get("attempts")?;
    if row.try_get::<bool, _>("expired")? || attempts >= MAX_CODE_ATTEMPTS {
        return Ok(CodeCheck::Expired);
    }
    if stored_phone != phone || stored_code != code {
        sqlx::query("UPDATE login_codes SET attempts = attempts + 1 WHERE phone_code_hash = $1")
            .bind(hash)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        return Ok(CodeCheck::Invalid);
    }
    sqlx::query("DELETE FROM login_codes WHERE phone_code_hash = $1")
        .bind(hash)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(CodeCheck::Valid)
}

/// The user of a phone number (unique index on users.phone).
pub async fn user_by_phone(pool: &PgPool, phone: &str) -> Result<Option<User>, sqlx::Error> {
    sqlx::query("SELECT id, first_name, phone FROM users WHERE phone = $1")
        .bind(phone)
        .fetch_optional(pool)
        .await?
        .as_ref()
        .map(user_from_row)
        .transpose()
}

/// Creates a user; `None` when the phone is taken.
pub async fn insert_user(
    pool: &PgPool,
    phone: &str,
    first_name: &str,
) -> Result<Option<User>, sqlx::Error> {
    sqlx::query(
        "INSERT INTO users (phone, first_name) VALUES ($1, $2) ON CONFLICT (phone) DO NOTHING
         RETURNING id, first_name, phone",
    )
    .bind(phone)
    .bind(first_name)
    .fetch_optional(pool)
    .await?
    .as_ref()
    .map(user_from_row)
    .transpose()
}

/// Users by id (primary key of users).
pub async fn users_by_ids(pool: &PgPool, ids: &[i64]) -> Result<Vec<User>, sqlx::Error> {
    sqlx::query("SELECT id, first_name, phone FROM users WHERE id = ANY($1) ORDER BY id")
        .bind(ids)
        .fetch_all(pool)
        .await?
        .iter()
        .map(user_from_row)
        .collect()
}

/// One signed-in device of a user.
pub struct AuthorizationRow {
    pub auth_key_id: i64,
    pub device_model: String,
    pub created_at: i64,
    pub bound_at: i64,
}

/// The devices signed in to `user_id` (index auth_keys_user; a user has few).
pub async fn authorizations(
    pool: &PgPool,
    user_id: i64,
) -> Result<Vec<AuthorizationRow>, sqlx::Error> {
    sqlx::query(
        "SELECT id, device_model, extract(epoch FROM created_at)::bigint AS created,
                coalesce(extract(epoch FROM bound_at)::bigint, 0) AS bound
         FROM auth_keys WHERE user_id = $1 ORDER BY id LIMIT 1000",
    )
    .bind(user_id)
    .fetch_all(pool)
    .await?
    .iter()
    .map(|r| {
        Ok(AuthorizationRow {
            auth_key_id: r.try_get("id")?,
            device_model: r.try_get("device_model")?,
            created_at: r.try_get("created")?,
            bound_at: r.try_get("bound")?,
        })
    })
    .collect()
}

/// Unbinds `auth_key_id` if it is signed in to `user_id` (primary key of auth_keys).
pub async fn unbind_if_owned(
    pool: &PgPool,
    auth_key_id: i64,
    user_id: i64,
) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query(
        "UPDATE auth_keys SET user_id = NULL, bound_at = now() WHERE id = $1 AND user_id = $2",
    )
    .bind(auth_key_id)
    .bind(user_id)
    .execute(pool)
    .await?
    .rows_affected()
        == 1)
}

/// The user each of these auth keys is bound to now (primary key of auth_keys).
pub async fn bindings(
    pool: &PgPool,
    auth_key_ids: &[i64],
) -> Result<Vec<(i64, Option<i64>)>, sqlx::Error> {
    sqlx::query("SELECT id, user_id FROM auth_keys WHERE id = ANY($1)")
        .bind(auth_key_ids)
        .fetch_all(pool)
        .await?
        .iter()
        .map(|r| Ok((r.try_get("id")?, r.try_get("user_id")?)))
        .collect()
}

/// A device's acknowledged pts (primary key of device_state).
pub async fn acked_pts(pool: &PgPool, auth_key_id: i64, user_id: i64) -> Result<i32, sqlx::Error> {
    Ok(sqlx::query_scalar(
        "SELECT acked_pts FROM device_state WHERE auth_key_id = $1 AND user_id = $2",
    )
    .bind(auth_key_id)
    .bind(user_id)
    .fetch_optional(pool)
    .await?
    .unwrap_or(0))
}

/// Moves a device's acknowledged pts forward (never back); returns the stored value.
pub async fn ack_pts(
    pool: &PgPool,
    auth_key_id: i64,
    user_id: i64,
    pts: i32,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO device_state (auth_key_id, user_id, acked_pts) VALUES ($1, $2, $3)
         ON CONFLICT (auth_key_id, user_id) DO UPDATE
            SET acked_pts = GREATEST(device_state.acked_pts, EXCLUDED.acked_pts), updated_at = now()
         RETURNING acked_pts",
    )
    .bind(auth_key_id)
    .bind(user_id)
    .bind(pts)
    .fetch_one(pool)
    .await
}
