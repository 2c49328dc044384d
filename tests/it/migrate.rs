//! `oxigram migrate`: migrates the schemas of the services it is given and exits, so a
//! deployment can run migrations as a step before the services start.

use oxigram_tests::{System, oxigram_command};
use sqlx::{Connection, PgConnection};

/// Migrations recorded in `schema`'s own `_sqlx_migrations` table (0 when it has none).
async fn applied(db: &mut PgConnection, schema: &str) -> anyhow::Result<i64> {
    let table: Option<String> =
        sqlx::query_scalar("SELECT to_regclass($1 || '._sqlx_migrations')::text")
            .bind(schema)
            .fetch_one(&mut *db)
            .await?;
    if table.is_none() {
        return Ok(0);
    }
    let query = format!("SELECT count(*) FROM {schema}._sqlx_migrations WHERE success");
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(query))
        .fetch_one(&mut *db)
        .await?)
}

#[tokio::test]
async fn migrate_applies_the_chosen_schemas_and_is_idempotent() -> anyhow::Result<()> {
    let (config, _ground) = System::config().await?;
    let url = config.database_url.clone().unwrap_or_default();
    let mut db = PgConnection::connect(&url).await?;

    let status = oxigram_command(&config)?
        .args(["migrate", "--target", "messages,dialogs"])
        .status()?;
    assert!(status.success(), "oxigram migrate failed: {status}");
    assert!(applied(&mut db, "messages").await? > 0);
    assert!(applied(&mut db, "dialogs").await? > 0);
    assert_eq!(applied(&mut db, "updates").await?, 0, "not asked for");

    let status = oxigram_command(&config)?
        .args(["migrate", "--target", "all"])
        .status()?;
    assert!(
        status.success(),
        "oxigram migrate --target all failed: {status}"
    );
    let first = applied(&mut db, "messages").await?;
    for schema in [
        "gateway", "messages", "updates", "dialogs", "dispatch", "media",
    ] {
        assert!(applied(&mut db, schema).await? > 0, "{schema} is migrated");
    }
    // Again: nothing new to apply, and no failure.
    let status = oxigram_command(&config)?
        .args(["migrate", "--target", "messages"])
        .status()?;
    assert!(status.success());
    assert_eq!(applied(&mut db, "messages").await?, first);

    let refused = oxigram_command(&config)?
        .args(["migrate", "--target", "nosuchservice"])
        .output()?;
    assert!(!refused.status.success(), "an unknown target is refused");
    Ok(())
}
