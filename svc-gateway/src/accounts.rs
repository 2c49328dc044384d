//! The SQL of accounts: users, auth keys, login codes and each device's acknowledged pts.
//! Statements of more than a line are in `sql/`.

use oxigram_proto::types::v1::User;
use sqlx::PgPool;

/// The columns of users a [`Profile`] reads, for the statements that read one.
#[macro_export]
macro_rules! profile_columns {
    () => {
        "id, phone, first_name, last_name, username, about, photo_file_id"
    };
}

/// A user's profile as stored: what she sees of herself. Others see it through the user view
/// (`user_view.rs`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Profile {
    pub id: i64,
    pub phone: String,
    pub first_name: String,
    pub last_name: String,
    pub username: Option<String>,
    pub about: String,
    /// A file reference of hers in svc-media; 0 when she has no photo.
    pub photo_file_id: i64,
}

impl Profile {
    /// The user as she sees herself: everything.
    pub fn own_view(&self) -> User {
        User {
            id: self.id,
            first_name: self.first_name.clone(),
            phone: self.phone.clone(),
            last_name: self.last_name.clone(),
            username: self.username.clone().unwrap_or_default(),
            about: self.about.clone(),
            photo_id: self.photo_file_id,
            contact: false,
            mutual_contact: false,
            // Presence is not an account's: the answer's composer sets it (`Gateway::users_for`).
            status: None,
        }
    }
}

/// A stored auth key (primary key of auth_keys).
pub async fn auth_key(
    pool: &PgPool,
    id: i64,
) -> Result<Option<(Vec<u8>, Option<i64>)>, sqlx::Error> {
    sqlx::query_as("SELECT secret_hash, user_id FROM auth_keys WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await
}

/// Auth keys whose binding changed at or after a moment, and when the database said so.
#[derive(Debug, sqlx::FromRow)]
pub struct Rebound {
    pub checked_at: chrono::DateTime<chrono::Utc>,
    pub auth_key_ids: Vec<i64>,
}

/// The auth keys signed in or out (or, temporary MTProto keys, bound or ended) at or after
/// `since`, at most `limit` of them (auth_keys_bound_at).
pub async fn rebound_auth_keys(
    pool: &PgPool,
    since: chrono::DateTime<chrono::Utc>,
    limit: i64,
) -> Result<Rebound, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/auth_keys_rebound.sql"))
        .bind(since)
        .bind(limit)
        .fetch_one(pool)
        .await
}

/// Stores a new auth key; `false` when the id is taken (the caller draws another).
pub async fn insert_auth_key(
    pool: &PgPool,
    id: i64,
    secret_hash: &[u8],
    device_model: &str,
) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query(include_str!("../sql/insert_auth_key.sql"))
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
    sqlx::query(include_str!("../sql/insert_login_code.sql"))
        .bind(hash)
        .bind(phone)
        .bind(code)
        .bind(ttl_secs)
        .execute(pool)
        .await?;
    Ok(())
}

/// How checking a login code went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeCheck {
    Valid,
    Invalid,
    Expired,
}

/// Most wrong guesses one login code takes.
const MAX_CODE_ATTEMPTS: i32 = 5;

/// A stored login code as a check sees it.
#[derive(sqlx::FromRow)]
struct LoginCode {
    phone: String,
    code: String,
    attempts: i32,
    expired: bool,
}

/// Checks a login code (primary key of login_codes); a valid code is used up.
pub async fn check_login_code(
    pool: &PgPool,
    hash: &str,
    phone: &str,
    code: &str,
) -> Result<CodeCheck, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let stored: Option<LoginCode> = sqlx::query_as(include_str!("../sql/lock_login_code.sql"))
        .bind(hash)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(stored) = stored else {
        return Ok(CodeCheck::Expired);
    };
    if stored.expired || stored.attempts >= MAX_CODE_ATTEMPTS {
        return Ok(CodeCheck::Expired);
    }
    if stored.phone != phone || stored.code != code {
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
pub async fn user_by_phone(pool: &PgPool, phone: &str) -> Result<Option<Profile>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        profile_columns!(),
        " FROM users WHERE phone = $1"
    ))
    .bind(phone)
    .fetch_optional(pool)
    .await
}

/// Creates a user; `None` when the phone is taken.
pub async fn insert_user(
    pool: &PgPool,
    phone: &str,
    first_name: &str,
) -> Result<Option<Profile>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/insert_user.sql"))
        .bind(phone)
        .bind(first_name)
        .fetch_optional(pool)
        .await
}

/// Profiles by id, ascending (primary key of users).
pub async fn profiles_by_ids(pool: &PgPool, ids: &[i64]) -> Result<Vec<Profile>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        profile_columns!(),
        " FROM users WHERE id = ANY($1) ORDER BY id"
    ))
    .bind(ids)
    .fetch_all(pool)
    .await
}

/// One signed-in device of a user (dates in Unix seconds; `bound_at` 0 when never bound).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
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
    sqlx::query_as(include_str!("../sql/authorizations.sql"))
        .bind(user_id)
        .fetch_all(pool)
        .await
}

/// Unbinds `auth_key_id` if it is signed in to `user_id` (primary key of auth_keys).
pub async fn unbind_if_owned(
    pool: &PgPool,
    auth_key_id: i64,
    user_id: i64,
) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query(include_str!("../sql/unbind_if_owned.sql"))
        .bind(auth_key_id)
        .bind(user_id)
        .execute(pool)
        .await?
        .rows_affected()
        == 1)
}

/// Unbinds every auth key signed in to `user_id` but `keep`; the keys unbound (index
/// auth_keys_user).
pub async fn unbind_others(
    pool: &PgPool,
    user_id: i64,
    keep: i64,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/unbind_others.sql"))
        .bind(user_id)
        .bind(keep)
        .fetch_all(pool)
        .await
}

/// The user each of these auth keys is bound to now (primary key of auth_keys).
pub async fn bindings(
    pool: &PgPool,
    auth_key_ids: &[i64],
) -> Result<Vec<(i64, Option<i64>)>, sqlx::Error> {
    sqlx::query_as("SELECT id, user_id FROM auth_keys WHERE id = ANY($1)")
        .bind(auth_key_ids)
        .fetch_all(pool)
        .await
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
    sqlx::query_scalar(include_str!("../sql/ack_pts.sql"))
        .bind(auth_key_id)
        .bind(user_id)
        .bind(pts)
        .fetch_one(pool)
        .await
}
