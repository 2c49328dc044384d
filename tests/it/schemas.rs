//! Each service's tables live only in its own schema, and no service's SQL names another's.

use std::{collections::BTreeSet, path::Path};

use oxigram_tests::{Mode, System};
use sqlx::Row;

const SCHEMAS: [&str; 6] = [
    "gateway", "messages", "updates", "dialogs", "dispatch", "media",
];

/// Tables each service owns (besides its outbox, inbox and migration history).
const OWNED: [(&str, &[&str]); 6] = [
    (
        "gateway",
        &[
            "users",
            "auth_keys",
            "login_codes",
            "device_state",
            "privacy_rules",
            "contacts",
            "limit_overrides",
            "bans",
            "limit_rules_version",
        ],
    ),
    (
        "messages",
        &[
            "message_bodies",
            "message_boxes",
            "box_sequences",
            "idempotency_keys",
            "blocks",
        ],
    ),
    ("updates", &["user_state", "update_log"]),
    (
        "dialogs",
        &[
            "dialogs",
            "dialog_incoming",
            "outbox_reads",
            "device_receipts",
            "dialog_contacts",
        ],
    ),
    ("dispatch", &[]),
    ("media", &["upload_parts", "files", "file_refs"]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_is_in_its_services_schema() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let mut alice = system.device().await?;
    alice.sign_up("15550301", "Alice").await?;
    let mut db = system.db().await?;
    let rows = sqlx::query(
        "SELECT table_schema, table_name FROM information_schema.tables
         WHERE table_schema NOT IN ('pg_catalog', 'information_schema')",
    )
    .fetch_all(&mut db)
    .await?;
    let tables: BTreeSet<(String, String)> = rows
        .iter()
        .map(|r| Ok((r.try_get("table_schema")?, r.try_get("table_name")?)))
        .collect::<Result<_, sqlx::Error>>()?;
    for (schema, _) in &tables {
        assert!(
            SCHEMAS.contains(&schema.as_str()),
            "a table outside the services' schemas: {schema}"
        );
    }
    for schema in SCHEMAS {
        for shared in ["outbox", "inbox", "_sqlx_migrations"] {
            assert!(
                tables.contains(&(schema.into(), shared.into())),
                "{schema}.{shared} missing"
            );
        }
    }
    for (schema, owned) in OWNED {
        for table in owned {
            let homes: Vec<&String> = tables
                .iter()
                .filter(|(_, t)| t == table)
                .map(|(s, _)| s)
                .collect();
            assert_eq!(homes, [schema], "{table} lives only in {schema}");
        }
    }
    // The shared autovacuum policy (libs/storage's migrations): every stored table of a service
    // but its outbox waits for 20 000 changed or inserted rows; the outbox keeps its frequent
    // vacuum.
    let policies = sqlx::query(
        "SELECT n.nspname AS schema, c.relname AS table, coalesce(c.reloptions, '{}') AS options
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind = 'r' AND n.nspname = ANY($1)",
    )
    .bind(SCHEMAS)
    .fetch_all(&mut db)
    .await?;
    assert!(policies.len() > 2 * SCHEMAS.len());
    for row in &policies {
        let (schema, table, options): (String, String, Vec<String>) = (
            row.try_get("schema")?,
            row.try_get("table")?,
            row.try_get("options")?,
        );
        let relaxed = [
            "autovacuum_vacuum_threshold=20000",
            "autovacuum_analyze_threshold=20000",
            "autovacuum_vacuum_insert_threshold=20000",
        ]
        .iter()
        .all(|o| options.contains(&(*o).to_owned()));
        let queue = ["outbox", "_sqlx_migrations"].contains(&table.as_str());
        assert_eq!(relaxed, !queue, "{schema}.{table}: {options:?}");
    }
    Ok(())
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            sources(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs" || e == "sql") {
            out.push(path);
        }
    }
    Ok(())
}

#[test]
fn no_service_sql_names_another_schema() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    for schema in SCHEMAS {
        let mut files = Vec::new();
        sources(&root.join(format!("svc-{schema}")), &mut files)?;
        assert!(!files.is_empty(), "svc-{schema} has sources");
        for file in files {
            let text = std::fs::read_to_string(&file)?.to_lowercase();
            for other in SCHEMAS.iter().filter(|s| **s != schema) {
                for keyword in ["from", "join", "into", "update", "table", "on"] {
                    for quote in ["", "\""] {
                        let needle = format!("{keyword} {quote}{other}{quote}.");
                        assert!(
                            !text.contains(&needle),
                            "{} names {other}'s schema: `{needle}`",
                            file.display()
                        );
                    }
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "the scan saw the services' sources");
    Ok(())
}
