//! The SQL of uploads, files and owners' references to them. Statements of more than a line
//! are in `sql/`.

use sqlx::{PgConnection, PgPool};

/// Records part `part` of upload `file_id` of `owner`, `size` bytes; a re-sent part replaces
/// the earlier one.
pub async fn save_part(
    pool: &PgPool,
    owner: i64,
    file_id: i64,
    part: i32,
    size: i32,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/save_part.sql"))
        .bind(owner)
        .bind(file_id)
        .bind(part)
        .bind(size)
        .execute(pool)
        .await?;
    Ok(())
}

/// The parts of an upload stored so far, in order (primary key of upload_parts).
pub async fn stored_parts(
    pool: &PgPool,
    owner: i64,
    file_id: i64,
) -> Result<Vec<i32>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT part FROM upload_parts WHERE owner_id = $1 AND file_id = $2 ORDER BY part",
    )
    .bind(owner)
    .bind(file_id)
    .fetch_all(pool)
    .await
}

/// The file of this content, if stored already (unique index on files.sha256).
pub async fn file_by_sha256(
    tx: &mut PgConnection,
    sha256: &str,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM files WHERE sha256 = $1")
        .bind(sha256)
        .fetch_optional(tx)
        .await
}

/// A content as stored: its id and where its blob is.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InsertedFile {
    pub id: i64,
    /// The blob of the content: the one given, unless the content was there already.
    pub blob_key: String,
}

/// Stores a content's file with its blob under `blob_key`; the file of the content as it is
/// stored (the existing one when the content is there, with its own blob). The row stays
/// locked until the transaction ends, so the collector cannot take it meanwhile.
pub async fn insert_file(
    tx: &mut PgConnection,
    sha256: &str,
    size: i64,
    blob_key: &str,
) -> Result<InsertedFile, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/insert_file.sql"))
        .bind(sha256)
        .bind(size)
        .bind(blob_key)
        .fetch_one(tx)
        .await
}

/// Gives `owner` a reference named `name` to file `file_id`; returns the reference's id
/// (primary key of file_refs). `used`: a message takes it at once (a photo's sizes).
pub async fn insert_file_ref(
    tx: &mut PgConnection,
    owner: i64,
    file_id: i64,
    name: &str,
    used: bool,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO file_refs (owner_id, file_id, name, used) VALUES ($1, $2, $3, $4) RETURNING id",
    )
    .bind(owner)
    .bind(file_id)
    .bind(name)
    .bind(used)
    .fetch_one(tx)
    .await
}

/// Forgets the parts of a completed upload (primary key of upload_parts, its prefix).
pub async fn delete_parts(
    tx: &mut PgConnection,
    owner: i64,
    file_id: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM upload_parts WHERE owner_id = $1 AND file_id = $2")
        .bind(owner)
        .bind(file_id)
        .execute(tx)
        .await?;
    Ok(())
}

/// A stored content, as a file reference (or a content id) names it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredFile {
    /// The content's id.
    pub file_id: i64,
    pub sha256: String,
    pub size: i64,
    pub blob_key: String,
    /// The reference's name (empty when read by content id).
    pub name: String,
}

/// The content behind reference `ref_id`, if `owner` holds it.
pub async fn file_of_ref(
    pool: &PgPool,
    owner: i64,
    ref_id: i64,
) -> Result<Option<StoredFile>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/file_of_ref.sql"))
        .bind(ref_id)
        .bind(owner)
        .fetch_optional(pool)
        .await
}

/// The content behind reference `ref_id` of `owner`'s, which a message takes: the collector
/// leaves the reference from now on.
pub async fn take_ref(
    pool: &PgPool,
    owner: i64,
    ref_id: i64,
) -> Result<Option<StoredFile>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/take_ref.sql"))
        .bind(ref_id)
        .bind(owner)
        .fetch_optional(pool)
        .await
}

/// A content by its id (primary key of files).
pub async fn content(pool: &PgPool, file_id: i64) -> Result<Option<StoredFile>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id AS file_id, sha256, size, blob_key, '' AS name FROM files WHERE id = $1",
    )
    .bind(file_id)
    .fetch_optional(pool)
    .await
}

/// The content with hash `sha256`, when `owner` holds a file of it or `visible` (the caller
/// checked she may see it otherwise).
pub async fn owner_file_of_hash(
    pool: &PgPool,
    owner: i64,
    sha256: &str,
    visible: bool,
) -> Result<Option<StoredFile>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/owner_file_of_hash.sql"))
        .bind(sha256)
        .bind(visible)
        .bind(owner)
        .fetch_optional(pool)
        .await
}

/// A part of an unfinished upload the collector removed.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StalePart {
    pub owner_id: i64,
    pub file_id: i64,
    pub part: i32,
}

/// Removes up to `limit` parts older than `grace_seconds` (upload_parts_age); their blobs are
/// the caller's to delete.
pub async fn collect_parts(
    pool: &PgPool,
    grace_seconds: i64,
    limit: i64,
) -> Result<Vec<StalePart>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/gc_parts.sql"))
        .bind(grace_seconds as f64)
        .bind(limit)
        .fetch_all(pool)
        .await
}

/// Removes up to `limit` references no message took within `grace_seconds`
/// (file_refs_untaken); the contents they named (each may have no reference left).
pub async fn collect_refs(
    pool: &PgPool,
    grace_seconds: i64,
    limit: i64,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/gc_refs.sql"))
        .bind(grace_seconds as f64)
        .bind(limit)
        .fetch_all(pool)
        .await
}

/// Removes content `file_id` when no reference to it is left (file_refs_file); its blob key
/// then, for the caller to delete. A reference made meanwhile keeps it.
pub async fn collect_content(pool: &PgPool, file_id: i64) -> Result<Option<String>, sqlx::Error> {
    let removed = sqlx::query_scalar(include_str!("../sql/gc_content.sql"))
        .bind(file_id)
        .fetch_optional(pool)
        .await;
    match removed {
        // A reference committed while the delete waited for the row: the content stays.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23503") => Ok(None),
        other => other,
    }
}
