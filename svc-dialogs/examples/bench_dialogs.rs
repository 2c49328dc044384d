//! The dialogs benchmark: fills a fresh database with one user's dialogs (10 000 by default,
//! 100 of them pinned, a tenth archived, muted and unread ones among them), her dialog filters
//! (20 by default, logged and applied as the projection applies them) and other users'
//! dialogs beside hers, then pages through her main list, her archive and every filter with
//! svc-dialogs' own GetDialogs (the page, its count and hash), and prints each kind's
//! p50/p99 per page and the plans the database uses.
//!
//! `OXIGRAM_TEST_INFRA=local cargo run --release -p svc-dialogs --example bench_dialogs -- \
//!     [--dialogs 10000] [--pinned 100] [--filters 20] [--others 200] [--rounds 3]`

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use oxigram_outbox::{FastPath, Outbox, RelayConfig};
use oxigram_proto::{
    dialogs::v1::{GetDialogsRequest, dialogs_server::Dialogs},
    types::v1::{
        self as types, DialogFilter, DialogsPage, DraftMessage, Peer, Update, UpdateDialogFilter,
        UserEvent, update,
    },
};
use oxigram_testkit::{
    bench::{flag, on_fresh_database, percentile},
    store::Migrated,
};
use prost::Message as _;
use svc_dialogs::{DialogsService, outbound::ToUpdates, projection};

const OWNER: i64 = 1;
/// Dialogs of each other user.
const OTHERS_DIALOGS: i64 = 500;
const PAGE: i32 = 100;
/// How many of the owner's peers are her contacts (every fifth).
const CONTACTS: i64 = 2_000;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    on_fresh_database(
        svc_dialogs::SCHEMA,
        &[&svc_dialogs::MIGRATOR, &oxigram_outbox::MIGRATOR],
        |db| async move { measure(&db).await },
    )
    .await
}

/// Filter `i` of the owner's: every kind of rule among them.
fn filter(i: i32, dialogs: i64) -> DialogFilter {
    let peer = |k: i64| Peer::user(1000 + 1 + (k * 37 + i64::from(i)) % dialogs);
    let everyone = DialogFilter {
        id: 2 + i,
        title: format!("filter {i}"),
        contacts: true,
        non_contacts: true,
        exclude_peers: (0..50).map(|k| peer(k + 500)).collect(),
        ..Default::default()
    };
    match i % 5 {
        0 => DialogFilter {
            exclude_archived: true,
            pinned_peers: (0..5).map(peer).collect(),
            ..everyone
        },
        1 => DialogFilter {
            exclude_read: true,
            ..everyone
        },
        2 => DialogFilter {
            exclude_muted: true,
            exclude_archived: true,
            exclude_read: true,
            ..everyone
        },
        3 => DialogFilter {
            contacts: false,
            non_contacts: false,
            pinned_peers: (0..10).map(peer).collect(),
            include_peers: (10..100).map(peer).collect(),
            exclude_peers: Vec::new(),
            ..everyone
        },
        _ => DialogFilter {
            non_contacts: false,
            exclude_muted: true,
            ..everyone
        },
    }
}

fn request(list: List, after: Option<&types::Dialog>, hash: i64) -> GetDialogsRequest {
    let (folder_id, filter_id) = match list {
        List::Folder(f) => (f, 0),
        List::Filter(f) => (0, f),
    };
    let r = types::GetDialogsRequest {
        offset_date: after.map_or(0, |d| d.top_message_date),
        offset_id: after.map_or(0, |d| d.top_message_id),
        offset_peer: after.and_then(|d| d.peer),
        offset_pinned: after.is_some_and(|d| d.pinned),
        limit: PAGE,
        folder_id,
        filter_id,
        hash,
        include_empty: false,
    };
    GetDialogsRequest {
        owner_id: OWNER,
        request: Some(r),
    }
}

#[derive(Clone, Copy, Debug)]
enum List {
    Folder(i32),
    Filter(i32),
}

async fn page(service: &DialogsService, r: GetDialogsRequest) -> anyhow::Result<DialogsPage> {
    Ok(service
        .get_dialogs(tonic::Request::new(r))
        .await
        .map_err(|s| anyhow::anyhow!("{s}"))?
        .into_inner())
}

/// Fills the database, pages through every list and prints the figures and plans.
async fn measure(db: &Migrated) -> anyhow::Result<()> {
    let dialogs = flag("--dialogs", 10_000)? as i64;
    let pinned = flag("--pinned", 100)? as i64;
    let filters = flag("--filters", 20)? as i32;
    let others = flag("--others", 200)? as i64;
    let rounds = flag("--rounds", 3)?;

    let started = Instant::now();
    sqlx::query(include_str!("bench_dialogs_contacts.sql"))
        .bind(OWNER)
        .bind(CONTACTS)
        .execute(&db.pool)
        .await?;
    sqlx::query(include_str!("bench_dialogs_fill.sql"))
        .bind(OWNER)
        .bind(dialogs)
        .bind(pinned)
        .execute(&db.pool)
        .await?;
    sqlx::query(include_str!("bench_dialogs_others.sql"))
        .bind(others)
        .bind(OTHERS_DIALOGS)
        .execute(&db.pool)
        .await?;
    // Every twentieth dialog has a draft.
    let draft = DraftMessage {
        text: "a draft of a few words".into(),
        date: 1_700_000_000,
        pts: 1,
        ..Default::default()
    };
    sqlx::query("UPDATE dialogs SET draft = $2, draft_pts = 1 WHERE owner_id = $1 AND peer_user_id % 20 = 0")
        .bind(OWNER)
        .bind(draft.encode_to_vec())
        .execute(&db.pool)
        .await?;
    let outbox = Outbox::new(db.pool.clone(), svc_dialogs::SCHEMA, RelayConfig::default());
    // The filters as the owner's log hands them to the projection.
    let events: Vec<UserEvent> = (0..filters)
        .map(|i| UserEvent {
            event_id: uuid::Uuid::new_v4().to_string(),
            user_id: OWNER,
            pts: i + 1,
            pts_count: 1,
            date: 1_700_000_000,
            update: Some(Update {
                kind: Some(update::Kind::DialogFilter(UpdateDialogFilter {
                    id: 2 + i,
                    filter: Some(filter(i, dialogs)),
                })),
            }),
            ..Default::default()
        })
        .collect();
    projection::apply(&db.pool, &outbox, events).await?;
    // As autovacuum leaves a table that has settled: statistics and the visibility map.
    sqlx::query("VACUUM ANALYZE").execute(&db.pool).await?;
    println!(
        "filled: {dialogs} dialogs of user {OWNER} ({pinned} pinned, {} archived), {filters} \
         filters, {others} other users with {OTHERS_DIALOGS} dialogs each, in {:.1?}",
        dialogs / 10,
        started.elapsed()
    );

    // GetDialogs as the service answers it; nothing here calls svc-updates.
    let to_updates = ToUpdates::new(oxigram_kit::channel(
        "http://127.0.0.1:9",
        Duration::from_secs(1),
    )?);
    let derived = FastPath::start(outbox.clone(), Arc::new(to_updates.clone()), Duration::ZERO);
    let service = DialogsService::new(db.pool.clone(), outbox, to_updates, derived);

    let mut lists = vec![("main list", List::Folder(0)), ("archive", List::Folder(1))];
    lists.extend((0..filters).map(|i| ("filters", List::Filter(2 + i))));
    // Warm up: the pool's connections and the caches.
    for (_, list) in &lists {
        page(&service, request(*list, None, 0)).await?;
    }
    let mut by_kind: Vec<(&str, Vec<Duration>, usize)> = Vec::new();
    let mut first_pages = Vec::new();
    let mut not_modified = Vec::new();
    for _ in 0..rounds {
        for (kind, list) in &lists {
            let mut after: Option<types::Dialog> = None;
            loop {
                let t = Instant::now();
                let p = page(&service, request(*list, after.as_ref(), 0)).await?;
                let took = t.elapsed();
                if after.is_none() {
                    first_pages.push(took);
                    // The same first page again, with its hash: the client holds it.
                    let t = Instant::now();
                    let again = page(&service, request(*list, None, p.hash)).await?;
                    not_modified.push(t.elapsed());
                    anyhow::ensure!(again.not_modified, "an unchanged page hashes alike");
                }
                let entry = match by_kind.iter_mut().find(|(k, _, _)| k == kind) {
                    Some(entry) => entry,
                    None => {
                        by_kind.push((kind, Vec::new(), 0));
                        by_kind
                            .last_mut()
                            .ok_or_else(|| anyhow::anyhow!("pushed"))?
                    }
                };
                entry.1.push(took);
                entry.2 += p.dialogs.len();
                if p.dialogs.len() < PAGE as usize {
                    break;
                }
                after = p.dialogs.last().cloned();
            }
        }
    }
    let mut all = Vec::new();
    let show = |name: &str, mut times: Vec<Duration>, listed: Option<usize>| {
        times.sort_unstable();
        let listed = listed.map_or(String::new(), |n| {
            format!("  ({:.0} dialogs a page)", n as f64 / times.len() as f64)
        });
        println!(
            "{name:<26} {:>5} pages: p50 {:>7.2?}  p99 {:>7.2?}  max {:>7.2?}{listed}",
            times.len(),
            percentile(&times, 0.50),
            percentile(&times, 0.99),
            percentile(&times, 1.0),
        );
    };
    for (kind, times, listed) in by_kind {
        all.extend(times.iter().copied());
        show(kind, times, Some(listed));
    }
    show("first pages", first_pages, None);
    show("first pages, not modified", not_modified, None);
    show("every page", all, None);

    // The plans of a page in the middle of the main list, and of its count.
    let mid = 1_700_000_000 + 500_000i64;
    let explain = |sql: &str| format!("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {sql}");
    let page_plan: Vec<String> =
        sqlx::query_scalar(sqlx::AssertSqlSafe(explain(svc_dialogs::store::PAGE_SQL)))
            .bind(OWNER)
            .bind(0i32)
            .bind(0i32)
            .bind(mid)
            .bind(i64::MAX)
            .bind(i64::MAX)
            .bind(i64::from(PAGE))
            .bind(false)
            .bind(false)
            .fetch_all(&db.pool)
            .await?;
    let count_plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(explain(include_str!(
        "../sql/folder_count.sql"
    ))))
    .bind(OWNER)
    .bind(0i32)
    .fetch_all(&db.pool)
    .await?;
    // A middle page of filter 1 (unread only), and the first page of filter 4 (contacts only,
    // no muted) with its count.
    let filter_plan = |i: i32, after: i64, counted: bool| {
        let f = filter(i, dialogs);
        let ids = |peers: &[Peer]| -> Vec<i64> { peers.iter().filter_map(Peer::user_id).collect() };
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(explain(
                svc_dialogs::filters::page_sql(),
            )))
            .bind(OWNER)
            .bind(after)
            .bind(i64::MAX)
            .bind(i64::MAX)
            .bind(i64::from(PAGE))
            .bind(ids(&f.pinned_peers))
            .bind(ids(&f.exclude_peers))
            .bind(ids(&f.include_peers))
            .bind(f.contacts)
            .bind(f.non_contacts)
            .bind(f.exclude_muted)
            .bind(f.exclude_read)
            .bind(f.exclude_archived)
            .bind(chrono::Utc::now().timestamp())
            .bind(counted)
            .fetch_all(&pool)
            .await
        }
    };
    let unread_plan = filter_plan(1, mid, false).await?;
    let contacts_plan = filter_plan(4, i64::MAX, true).await?;
    for (name, plan) in [
        ("main list, a middle page", page_plan),
        ("main list, its count", count_plan),
        ("filter 1 (unread only), a middle page", unread_plan),
        (
            "filter 4 (contacts only, no muted), its first page and count",
            contacts_plan,
        ),
    ] {
        println!("\n{name}:");
        for line in plan {
            println!("  {line}");
        }
    }
    Ok(())
}
