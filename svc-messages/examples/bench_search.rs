//! The search benchmark: fills a fresh database with one user's messages (and other users'
//! messages beside them), indexes them through the search indexer, then times word and
//! word-beginning queries through the store's own search (also while some of her newest
//! boxes are still queued) and prints their p50/p99 and the plans the database uses.
//!
//! `OXIGRAM_TEST_INFRA=local cargo run --release -p svc-messages --example bench_search -- \
//!     [--messages 200000] [--others 200000] [--queries 300] [--queued 200]`

mod common;

use common::{flag, percentile};

use std::time::{Duration, Instant};

use oxigram_testkit::store::Migrated;
use svc_messages::{
    search_index,
    search_words::QueryWords,
    store::{self, SearchQuery},
};

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

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    common::on_fresh_database(|db| async move { measure(&db).await }).await
}

/// Times `texts` as searches of `peer` (0 = every dialog); prints p50/p99 and returns the
/// median and the slowest text.
async fn time_queries(
    db: &Migrated,
    name: &str,
    texts: &[String],
    peer: i64,
) -> anyhow::Result<(String, String)> {
    let mut times = Vec::with_capacity(texts.len());
    let mut hits = 0;
    for text in texts {
        let q = query(text, peer)?;
        let t = Instant::now();
        hits += store::search(&db.pool, &q).await?.messages.len();
        times.push((t.elapsed(), text));
    }
    times.sort_unstable();
    let durations: Vec<Duration> = times.iter().map(|(d, _)| *d).collect();
    println!(
        "{name:<32} {} queries: p50 {:>7.2?}  p99 {:>7.2?}  max {:>7.2?}  ({:.1} found per page)",
        texts.len(),
        percentile(&durations, 0.50),
        percentile(&durations, 0.99),
        percentile(&durations, 1.0),
        hits as f64 / texts.len() as f64
    );
    Ok((
        times[times.len() / 2].1.clone(),
        times[times.len() - 1].1.clone(),
    ))
}

fn query(text: &str, peer: i64) -> anyhow::Result<SearchQuery> {
    Ok(SearchQuery {
        owner: OWNER,
        peer,
        words: QueryWords::parse(text).map_err(|e| anyhow::anyhow!("{text:?}: {e:?}"))?,
        min_date: 0,
        max_date: i64::MAX,
        from: 0,
        below_id: i64::MAX,
        limit: 20,
    })
}

/// Fills the database, indexes it, runs the queries and prints their figures and plans.
async fn measure(db: &Migrated) -> anyhow::Result<()> {
    let messages = flag("--messages", 200_000)? as i64;
    let others = flag("--others", 200_000)? as i64;
    let queries = flag("--queries", 300)?;
    let lag = flag("--queued", 200)? as i64;
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
    println!(
        "filled: {messages} messages of user {OWNER} over {PEERS} dialogs, {others} of other \
         users, {} words, in {:.1?}",
        words.len(),
        started.elapsed()
    );

    // Every box through the indexer, as the service's indexer takes them.
    sqlx::query(
        "INSERT INTO search_queue (owner_id, body_id) SELECT owner_id, body_id FROM message_boxes",
    )
    .execute(&db.pool)
    .await?;
    let started = Instant::now();
    let mut indexed = 0;
    loop {
        match search_index::index_queued(&db.pool, search_index::BATCH).await? {
            0 => break,
            n => indexed += n,
        }
    }
    let took = started.elapsed();
    sqlx::query("VACUUM ANALYZE").execute(&db.pool).await?;
    let (keys, size): (i64, String) = sqlx::query_as(
        "SELECT count(*), pg_size_pretty(pg_total_relation_size('message_words')) \
         FROM message_words",
    )
    .fetch_one(&db.pool)
    .await?;
    println!(
        "indexed: {indexed} boxes in {took:.1?} ({:.0} boxes/s), {keys} keys, {size} with \
         their index",
        indexed as f64 / took.as_secs_f64()
    );

    // Words across the vocabulary (common and rare alike), and their first 4 characters.
    let pick = |i: usize| &words[(i * 104_729 + 7) % words.len()];
    let word_queries: Vec<String> = (0..queries).map(|i| pick(i).clone()).collect();
    let prefix_queries: Vec<String> = (0..queries)
        .map(|i| pick(i + queries).chars().take(4).collect())
        .collect();

    // Warm up: the pool's connections and the caches.
    for text in word_queries.iter().take(20) {
        store::search(&db.pool, &query(text, 0)?).await?;
    }
    let mut slowest = Vec::new();
    let cases: [(&str, &[String], i64); 3] = [
        ("word, every dialog", &word_queries, 0),
        ("word, one dialog", &word_queries, OWNER + 1),
        ("word beginning, every dialog", &prefix_queries, 0),
    ];
    for (name, texts, peer) in cases {
        let (median, worst) = time_queries(db, name, texts, peer).await?;
        slowest.push((name, "median", median, peer));
        slowest.push((name, "slowest", worst, peer));
    }

    // The same words while the indexer lags: her newest boxes still queued.
    sqlx::query(
        "INSERT INTO search_queue (owner_id, body_id) \
         SELECT owner_id, body_id FROM message_boxes WHERE owner_id = $1 \
         ORDER BY box_id DESC LIMIT $2",
    )
    .bind(OWNER)
    .bind(lag)
    .execute(&db.pool)
    .await?;
    time_queries(db, &format!("word, {lag} of hers queued"), &word_queries, 0).await?;

    // The plans of the candidates' statement for a median and the slowest query of each kind,
    // with the first round's size.
    for (name, which, text, peer) in slowest {
        let q = query(&text, peer)?;
        let explain = format!(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {}",
            include_str!("../sql/search_candidates.sql")
        );
        let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .persistent(false)
            .bind(OWNER)
            .bind(peer)
            .bind(q.words.lead())
            .bind(q.words.lead_end())
            .bind(i64::MAX)
            .bind(40_i64)
            .fetch_all(&db.pool)
            .await?;
        println!("\nplan of the {which} {name} query {text:?}, first round of candidates:");
        for line in &plan {
            println!("  {line}");
        }
    }

    Ok(())
}
