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

/// Stores a content's file; returns its id (the existing one when the content is there).
pub async fn insert_file(
    tx: &mut PgConnection,
    sha256: &str,
    size: i64,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/insert_file.sql"))
        .bind(sha256)
        .bind(size)
        .fetch_one(tx)
        .await
}

/// Gives `owner` a reference named `name` to file `file_id`; returns the reference's id
/// (primary key of file_refs).
pub async fn insert_file_ref(
    tx: &mut PgConnection,
    owner: i64,
    file_id: i64,
    name: &str,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO file_refs (owner_id, file_id, name) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(owner)
    .bind(file_id)
    .bind(name)
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

/// The content behind a file reference, when `owner` holds it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredFile {
    pub sha256: String,
    pub size: i64,
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
