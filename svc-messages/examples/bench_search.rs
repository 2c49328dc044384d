//! The search benchmark: fills a fresh database with one user's messages (and other users'
//! messages beside them), then times word and substring queries through the store's own
//! search and prints their p50/p99 and the plan the database uses.
//!
//! `OXIGRAM_TEST_INFRA=local cargo run -p svc-messages --example bench_search -- \
//!     [--messages 200000] [--others 200000] [--queries 300]`

mod common;

use common::{flag, percentile};

use std::time::{Duration, Instant};

use oxigram_testkit::store::Migrated;
use svc_messages::store::{self, SearchQuery};

const OWNER: i64 = 1;
/// The owner's dialogs.
const PEERS: i64 = 50;

/// Pseudo-words of two or three syllables, the first ones the most frequent in the texts.
fn vocabulary() -> Vec<String> {
    const SYLLABLES: [&str; 24] = [
        "ka", "lo", "mi", "ren", "sa", "tu", "vel", "no", "pri", "dan", "cho", "gre", "ul", "fa",
        "bex", "quo", "ti", "mar", "zen", "ho", "lu", "wes", "ob", "ji",
    ];
    let n = SYLLABLES.len();
    let mut words = Vec::new();
    for i in 0..n * n * 4 {
        let mut w = String::new();
        w.push_str(SYLLABLES[i % n]);
        w.push_str(SYLLABLES[(i / n) % n]);
        if i >= n * n {
            w.push_str(SYLLABLES[(i * 7 + i / (n * n)) % n]);
        }
        words.push(w);
    }
    words.sort();
    words.dedup();
    // A fixed shuffle, so frequency is unrelated to spelling.
    let len = words.len();
    for i in 0..len {
        words.swap(i, (i * 7919 + 13) % len);
    }
    words
}

fn plan_text(plan: &[String]) -> String {
    plan.first().cloned().unwrap_or_default()
}

/// The rows the plan's top node returned.
fn plan_rows(top: &str) -> Option<i64> {
    let rows = top.split("rows=").nth(1)?;
    rows.split(' ').next()?.parse().ok()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    common::on_fresh_database(|db| async move { measure(&db).await }).await
}

/// Fills the database, runs the queries and prints their figures and plans.
async fn measure(db: &Migrated) -> anyhow::Result<()> {
    let messages = flag("--messages", 200_000)? as i64;
    let others = flag("--others", 200_000)? as i64;
    let queries = flag("--queries", 300)?;
    let words = vocabulary();

    let started = Instant::now();
    sqlx::query(include_str!("bench_search_fill.sql"))
        .bind(OWNER)
        .bind(messages)
        .bind(PEERS)
        .bind(others)
        .bind(&words)
        .execute(&db.pool)
        .await?;
    sqlx::query("ANALYZE").execute(&db.pool).await?;
    println!(
        "filled: {messages} messages of user {OWNER} over {PEERS} dialogs, {others} of other \
         users, {} words, in {:.1?}",
        words.len(),
        started.elapsed()
    );

    // Words across the vocabulary (common and rare alike), and 4-character pieces of them.
    let pick = |i: usize| &words[(i * 104_729 + 7) % words.len()];
    let word_queries: Vec<String> = (0..queries).map(|i| pick(i).clone()).collect();
    let substring_queries: Vec<String> = (0..queries)
        .map(|i| {
            let w: Vec<char> = pick(i + queries).chars().collect();
            let start = i % (w.len().saturating_sub(3)).max(1);
            w[start..(start + 4).min(w.len())].iter().collect()
        })
        .collect();
    let query = |text: &str, peer: i64| SearchQuery {
        owner: OWNER,
        peer,
        text: text.to_owned(),
        min_date: 0,
        max_date: i64::MAX,
        from: 0,
        below_id: i64::MAX,
        limit: 20,
    };

    let cases: [(&str, &[String], i64); 3] = [
        ("word, every dialog", &word_queries, 0),
        ("word, one dialog", &word_queries, OWNER + 1),
        ("substring, every dialog", &substring_queries, 0),
    ];
    // Warm up: the pool's connections and the caches.
    for text in word_queries.iter().take(20) {
        store::search(&db.pool, &query(text, 0)).await?;
    }
    let mut slowest = Vec::new();
    for (name, texts, peer) in cases {
        let mut times = Vec::with_capacity(texts.len());
        let mut hits = 0;
        for text in texts {
            let t = Instant::now();
            hits += store::search(&db.pool, &query(text, peer)).await?.len();
            times.push((t.elapsed(), text));
        }
        times.sort_unstable();
        let durations: Vec<Duration> = times.iter().map(|(d, _)| *d).collect();
        println!(
            "{name:<24} {} queries: p50 {:>7.2?}  p99 {:>7.2?}  max {:>7.2?}  ({:.1} found per page)",
            texts.len(),
            percentile(&durations, 0.50),
            percentile(&durations, 0.99),
            percentile(&durations, 1.0),
            hits as f64 / texts.len() as f64
        );
        let median = times[times.len() / 2].1;
        let worst = times[times.len() - 1].1;
        slowest.push((name, "median", median.clone(), peer));
        slowest.push((name, "slowest", worst.clone(), peer));
    }

    // The plans of a median and of the slowest query of each kind, as the service plans them:
    // the first step always, the second when the first did not fill the page.
    for (name, which, text, peer) in slowest {
        let pattern = store::contains_pattern(&text);
        for (step, sql) in [
            ("newest boxes", include_str!("../sql/search_recent.sql")),
            ("index", include_str!("../sql/search_indexed.sql")),
        ] {
            let explain = format!("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {sql}");
            let mut plan = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
                .persistent(false)
                .bind(OWNER)
                .bind(peer)
                .bind(&pattern)
                .bind(0_i64)
                .bind(i64::MAX)
                .bind(0_i64)
                .bind(i64::MAX)
                .bind(20_i64);
            if step == "newest boxes" {
                plan = plan.bind(20 * store::RECENT_BOXES_PER_RESULT);
            }
            let plan: Vec<String> = plan.fetch_all(&db.pool).await?;
            println!("\nplan of the {which} {name} query {text:?}, step {step}:");
            for line in &plan {
                println!("  {line}");
            }
            let filled = plan_rows(&plan_text(&plan)) == Some(20);
            if step == "newest boxes" && filled {
                break;
            }
        }
    }

    Ok(())
}
