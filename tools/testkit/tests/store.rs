//! The store fixture: a schema migrated into a database of its own, seen by the pool as a
//! service's pool sees its schema.

use oxigram_testkit::store;

static PROBE: sqlx::migrate::Migrator = sqlx::migrate!("tests/migrations");

#[tokio::test]
async fn pool_resolves_names_in_the_migrated_schema() -> anyhow::Result<()> {
    let db = store::migrated("probe_schema", &[&PROBE]).await?;
    let schema: String = sqlx::query_scalar("SELECT current_schema()")
        .fetch_one(&db.pool)
        .await?;
    assert_eq!(schema, "probe_schema");
    sqlx::query("INSERT INTO probe (id, note) VALUES (1, 'one')")
        .execute(&db.pool)
        .await?;
    let (table_schema, rows): (String, i64) = sqlx::query_as(
        "SELECT table_schema::text, (SELECT count(*) FROM probe) \
         FROM information_schema.tables WHERE table_name = 'probe'",
    )
    .fetch_one(&db.pool)
    .await?;
    assert_eq!((table_schema.as_str(), rows), ("probe_schema", 1));
    Ok(())
}

#[tokio::test]
async fn each_fixture_has_its_own_database() -> anyhow::Result<()> {
    let (a, b) = tokio::try_join!(
        store::migrated("probe_schema", &[&PROBE]),
        store::migrated("probe_schema", &[&PROBE]),
    )?;
    assert_ne!(a.url, b.url);
    sqlx::query("INSERT INTO probe (id, note) VALUES (1, 'a')")
        .execute(&a.pool)
        .await?;
    let in_b: i64 = sqlx::query_scalar("SELECT count(*) FROM probe")
        .fetch_one(&b.pool)
        .await?;
    assert_eq!(in_b, 0);
    Ok(())
}

#[tokio::test]
async fn database_names_are_unique() {
    let names: std::collections::HashSet<String> = (0..100)
        .map(|_| oxigram_testkit::unique_name("t"))
        .collect();
    assert_eq!(names.len(), 100);
}
