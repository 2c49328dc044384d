//! The SQL of uploads, files, the blobs a file is stored in, and owners' references to them.
//! Statements of more than a line are in `sql/`.

use sqlx::{PgConnection, PgPool};

/// Stores part `part` of upload `file_id` of `owner`, `size` bytes in blob `blob_key`, when the
/// upload had no such part; false when it had (then [`replace_part`] replaces it).
pub async fn insert_part(
    pool: &PgPool,
    owner: i64,
    file_id: i64,
    part: i32,
    size: i32,
    blob_key: &str,
) -> Result<bool, sqlx::Error> {
    let inserted: Option<i32> = sqlx::query_scalar(include_str!("../sql/insert_part.sql"))
        .bind(owner)
        .bind(file_id)
        .bind(part)
        .bind(size)
        .bind(blob_key)
        .fetch_optional(pool)
        .await?;
    Ok(inserted.is_some())
}

/// Replaces the stored part `part` of upload `file_id` of `owner` by `size` bytes in blob
/// `blob_key`; the blob key it had (to delete), or None when the part is not stored (any
/// more: a completion took it meanwhile).
pub async fn replace_part(
    pool: &PgPool,
    owner: i64,
    file_id: i64,
    part: i32,
    size: i32,
    blob_key: &str,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/replace_part.sql"))
        .bind(owner)
        .bind(file_id)
        .bind(part)
        .bind(size)
        .bind(blob_key)
        .fetch_optional(pool)
        .await
}

/// A stored part of an upload.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredPart {
    pub part: i32,
    pub size: i32,
    pub blob_key: String,
}

/// The parts of an upload stored so far, in order (primary key of upload_parts).
pub async fn stored_parts(
    pool: &PgPool,
    owner: i64,
    file_id: i64,
) -> Result<Vec<StoredPart>, sqlx::Error> {
    sqlx::query_as(
        "SELECT part, size, blob_key FROM upload_parts WHERE owner_id = $1 AND file_id = $2 ORDER BY part",
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

/// A content as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InsertedFile {
    pub id: i64,
    /// Whether this call stored it: false when the content was there already (then it keeps
    /// its own blobs, and the caller's are not needed).
    pub inserted: bool,
}

/// Stores a content's file (once per content); its blobs are the caller's to record when it
/// was stored by this call ([`take_parts`], [`insert_content_blob`]). The row stays locked
/// until the transaction ends, so the collector cannot take it meanwhile.
pub async fn insert_file(
    tx: &mut PgConnection,
    sha256: &str,
    size: i64,
) -> Result<InsertedFile, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/insert_file.sql"))
        .bind(sha256)
        .bind(size)
        .fetch_one(tx)
        .await
}

/// Takes the parts of upload `file_id` of `owner` out of the upload (it is closed: the same
/// file_id starts a new upload, with new blobs); with `place`, they become the blobs of
/// content `content`. The parts taken, in order.
pub async fn take_parts(
    tx: &mut PgConnection,
    owner: i64,
    file_id: i64,
    content: i64,
    place: bool,
) -> Result<Vec<StoredPart>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/take_parts.sql"))
        .bind(owner)
        .bind(file_id)
        .bind(content)
        .bind(place)
        .fetch_all(tx)
        .await
}

/// Records the single blob `blob_key` of content `file_id`, `size` bytes (a content the server
/// made; primary key of content_blobs).
pub async fn insert_content_blob(
    tx: &mut PgConnection,
    file_id: i64,
    size: i64,
    blob_key: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO content_blobs (file_id, byte_offset, size, blob_key) VALUES ($1, 0, $2, $3)",
    )
    .bind(file_id)
    .bind(size)
    .bind(blob_key)
    .execute(tx)
    .await?;
    Ok(())
}

/// One blob of a content: its bytes are the content's `byte_offset..byte_offset + size`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ContentBlob {
    pub byte_offset: i64,
    pub size: i64,
    pub blob_key: String,
}

/// The blobs of content `file_id` that its bytes `start..end` span, in order.
pub async fn blobs_in_window(
    pool: &PgPool,
    file_id: i64,
    start: i64,
    end: i64,
) -> Result<Vec<ContentBlob>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/blobs_in_window.sql"))
        .bind(file_id)
        .bind(start)
        .bind(end)
        .fetch_all(pool)
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

/// A stored content, as a file reference (or a content id) names it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredFile {
    /// The content's id.
    pub file_id: i64,
    pub sha256: String,
    pub size: i64,
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
    sqlx::query_as("SELECT id AS file_id, sha256, size, '' AS name FROM files WHERE id = $1")
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

/// Removes up to `limit` parts older than `grace_seconds` (upload_parts_age); their blob keys,
/// for the caller to delete.
pub async fn collect_parts(
    pool: &PgPool,
    grace_seconds: i64,
    limit: i64,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/gc_parts.sql"))
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

/// Removes content `file_id` when no reference to it is left (file_refs_file); the keys of its
/// blobs then, for the caller to delete (none when it stays). A reference made meanwhile keeps
/// it.
pub async fn collect_content(pool: &PgPool, file_id: i64) -> Result<Vec<String>, sqlx::Error> {
    let removed = sqlx::query_scalar(include_str!("../sql/gc_content.sql"))
        .bind(file_id)
        .fetch_all(pool)
        .await;
    match removed {
        // A reference committed while the delete waited for the row: the content stays.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23503") => Ok(vec![]),
        other => other,
    }
}
