//! GetDialogs as a client gets it, through the gateway: one user with 10 000 dialogs whose
//! peers are accounts with profiles, 100 of the dialogs pinned, a tenth archived, a tenth
//! muted, a fiftieth marked unread, a twentieth with a draft, a quarter answered by their
//! peer (unread), and 20 dialog filters of every kind of rule. Each page is what a client
//! waits for: svc-dialogs' page, its top messages from svc-messages, and every user it names
//! through the viewer's rights (profiles, privacy rules, contacts, blocks) with a status.
//!
//! The peers' accounts are written straight into the gateway's schema
//! (`dialogs_gateway_peers.sql`: a sign-up is one row of `gateway.users`), with their privacy
//! rules, whether they keep the owner as a contact, and a last seen
//! (`dialogs_gateway_sights.sql`). Everything else goes through the client API, so every
//! service holds what it would: a send per dialog, the answers from the peers' own devices
//! (a few of which then block her), her 2 000 contacts imported, every setting. Once her
//! dialogs hold all of it and the database is vacuumed and analysed, her device (a real auth
//! key, over gRPC) pages through her main list, her archive and every filter (pages of 100),
//! asks each first page again with its hash (`not_modified`), and asks GetPeerDialogs for
//! 100 peers at a time. Prints p50/p99/max per kind and overall, the load average, then a
//! JSON line.
//!
//! ```sh
//! OXIGRAM_TEST_INFRA=local cargo run --release -p oxigram-tests --example dialogs_gateway -- \
//!     [--dialogs 10000] [--pinned 100] [--filters 20] [--contacts 2000] [--rounds 3] \
//!     [--peer-calls 20]
//! ```

use std::{collections::HashSet, time::Duration};

use futures::{StreamExt, TryStreamExt, stream};
use oxigram_client::Client;
use oxigram_proto::{
    api::v1::{DialogsSlice, GetDialogsRequest, SendMessageRequest},
    dialog_rules::MUTE_FOREVER,
    types::v1::{
        BlockRequest, Dialog, DialogFilter, InputPeer, Peer, PeerNotifySettings, SaveDraftRequest,
    },
};
use oxigram_testkit::bench::{flag, percentile};
use oxigram_tests::{LOGIN_CODE, Mode, System, TestClient};
use tokio::time::Instant;

const PAGE: i32 = 100;
/// Calls under way at once while the dialogs are made.
const FILL_CONCURRENCY: usize = 32;
/// Every `ANSWERED`th peer answers the owner (her dialog with him is then unread).
const ANSWERED: usize = 4;
/// Every `BLOCKS`th peer who answered then blocks her.
const BLOCKS: usize = 50;

struct Args {
    dialogs: usize,
    pinned: usize,
    filters: usize,
    contacts: usize,
    rounds: usize,
    peer_calls: usize,
}

fn args() -> anyhow::Result<Args> {
    let a = Args {
        dialogs: flag("--dialogs", 10_000)?,
        pinned: flag("--pinned", 100)?,
        filters: flag("--filters", 20)?,
        contacts: flag("--contacts", 2_000)?,
        rounds: flag("--rounds", 3)?,
        peer_calls: flag("--peer-calls", 20)?,
    };
    anyhow::ensure!(a.dialogs >= 1_000, "--dialogs: at least 1000");
    anyhow::ensure!(a.pinned <= 100, "--pinned: at most 100");
    anyhow::ensure!(a.filters <= 30, "--filters: at most 30");
    anyhow::ensure!(
        a.contacts <= a.dialogs / 5,
        "--contacts: at most a fifth of --dialogs"
    );
    Ok(a)
}

/// The load average (1, 5, 15 minutes), as `uptime` shows it.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Peer `i` (0-based, in phone order) of the owner's.
#[derive(Clone, Copy)]
struct Peers<'a>(&'a [(i64, String)]);

impl Peers<'_> {
    fn id(&self, i: usize) -> i64 {
        self.0[i % self.0.len()].0
    }
    fn input(&self, i: usize) -> InputPeer {
        InputPeer::user(self.id(i))
    }
    fn peer(&self, i: usize) -> Peer {
        Peer::user(self.id(i))
    }
    fn pinned(&self, i: usize, pinned: usize) -> bool {
        // Spread over the list, never an archived one (i % 10 == 3).
        pinned > 0 && i.is_multiple_of(self.0.len() / pinned)
    }
}

/// Filter `i` of the owner's: every kind of rule among them (those of
/// `svc-dialogs/examples/bench_dialogs.rs`).
fn filter(i: usize, peers: Peers<'_>) -> DialogFilter {
    let peer = |k: usize| peers.peer(k * 37 + i);
    let id = 2 + i as i32;
    let everyone = DialogFilter {
        id,
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

/// Runs `calls` with `FILL_CONCURRENCY` of them under way at once.
async fn all<F>(calls: impl Iterator<Item = F>) -> anyhow::Result<()>
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    stream::iter(calls)
        .buffer_unordered(FILL_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Makes the owner's dialogs and settings; returns her peers (id, phone) in phone order.
async fn fill(system: &System, owner: &TestClient, a: &Args) -> anyhow::Result<Vec<(i64, String)>> {
    let me = owner.user_id()?;
    let started = Instant::now();
    let mut db = system.db().await?;
    let mut peers: Vec<(i64, String)> = sqlx::query_as(include_str!("dialogs_gateway_peers.sql"))
        .bind(a.dialogs as i32)
        .fetch_all(&mut db)
        .await?;
    peers.sort_by(|x, y| x.1.cmp(&y.1));
    let ids: Vec<i64> = peers.iter().map(|p| p.0).collect();
    let counted: i64 = sqlx::query_scalar(include_str!("dialogs_gateway_sights.sql"))
        .bind(&ids)
        .bind(me)
        .fetch_one(&mut db)
        .await?;
    anyhow::ensure!(
        counted as usize == a.dialogs,
        "every peer's rules and last seen"
    );
    eprintln!(
        "{} peers' accounts in {:.1?}",
        peers.len(),
        started.elapsed()
    );
    let p = Peers(&peers);

    // Her contacts first, so the filters by contacts have some: every fifth peer.
    let mine: Vec<(&str, &str, &str)> = (0..a.dialogs)
        .step_by(5)
        .take(a.contacts)
        .map(|i| (peers[i].1.as_str(), "Friend", "of the owner"))
        .collect();
    for chunk in mine.chunks(1_000) {
        owner.import_contacts(chunk).await?;
    }

    // A dialog with every peer: she wrote to each.
    let t = Instant::now();
    all((0..a.dialogs).map(|i| async move {
        owner.send(p.id(i), i as i64 + 1, "hello there").await?;
        anyhow::Ok(())
    }))
    .await?;
    eprintln!("{} sends in {:.1?}", a.dialogs, t.elapsed());

    // A quarter of the peers answer from their own device (one channel for all of them).
    let t = Instant::now();
    let channel = oxigram_client::connect(&system.gateway()).await?;
    let channel = &channel;
    all((0..a.dialogs).step_by(ANSWERED).map(|i| async move {
        let device = Client::create(channel.clone(), "bench peer").await?;
        let login = device.request_code(&p.0[i].1).await?;
        device.sign_in(&login, LOGIN_CODE).await?;
        device
            .send_message(SendMessageRequest {
                peer: Some(InputPeer::user(me)),
                random_id: 1,
                text: "an answer".into(),
                ..Default::default()
            })
            .await?;
        if (i / ANSWERED) % BLOCKS == 1 {
            device
                .messages()
                .block(BlockRequest { user_id: me })
                .await?;
        }
        anyhow::Ok(())
    }))
    .await?;
    eprintln!(
        "{} answers in {:.1?}",
        a.dialogs.div_ceil(ANSWERED),
        t.elapsed()
    );

    // Her settings: pins, the archive, mutes, unread marks, drafts, filters.
    let t = Instant::now();
    for i in (0..a.dialogs).filter(|&i| p.pinned(i, a.pinned)) {
        owner.toggle_dialog_pin(p.input(i), true).await?;
    }
    let archived: Vec<usize> = (0..a.dialogs).filter(|i| i % 10 == 3).collect();
    for chunk in archived.chunks(100) {
        let moved = chunk.iter().map(|&i| (p.input(i), 1)).collect();
        owner.edit_peer_folders(moved).await?;
    }
    all((0..a.dialogs).filter(|i| i % 10 == 6).map(|i| async move {
        let muted = PeerNotifySettings {
            mute_until: MUTE_FOREVER,
            ..Default::default()
        };
        owner.update_notify_settings(p.input(i), muted).await?;
        anyhow::Ok(())
    }))
    .await?;
    all((0..a.dialogs).filter(|i| i % 50 == 7).map(|i| async move {
        owner.mark_dialog_unread(p.input(i), true).await?;
        anyhow::Ok(())
    }))
    .await?;
    all((0..a.dialogs).filter(|i| i % 20 == 9).map(|i| async move {
        let draft = SaveDraftRequest {
            peer: Some(p.input(i)),
            text: "a draft of a few words".into(),
            ..Default::default()
        };
        owner.save_draft(draft).await?;
        anyhow::Ok(())
    }))
    .await?;
    for i in 0..a.filters {
        owner
            .update_dialog_filter(2 + i as i32, Some(filter(i, p)))
            .await?;
    }
    eprintln!("settings in {:.1?}", t.elapsed());

    // Her dialogs hold it all once svc-dialogs has applied her whole log and the log stopped
    // moving (a send's events reach the log a moment after the send answered).
    let t = Instant::now();
    let mut settled_at: Option<(i32, Instant)> = None;
    loop {
        let (logged, applied): (Option<i32>, Option<i32>) = sqlx::query_as(
            "SELECT (SELECT pts FROM updates.user_state WHERE user_id = $1), \
                    (SELECT pts FROM dialogs.log_positions WHERE owner_id = $1)",
        )
        .bind(me)
        .fetch_one(&mut db)
        .await?;
        let now = Instant::now();
        match (logged, applied, settled_at) {
            (Some(l), Some(p), Some((was, since)))
                if l == p && l == was && now - since >= Duration::from_secs(2) =>
            {
                break;
            }
            (Some(l), Some(p), Some((was, _))) if l == p && l == was => {}
            (Some(l), Some(p), _) if l == p => settled_at = Some((l, now)),
            _ => settled_at = None,
        }
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(600),
            "the dialogs did not settle"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // As autovacuum leaves tables that have settled: statistics and the visibility map.
    sqlx::query("VACUUM ANALYZE").execute(&mut db).await?;
    eprintln!("settled and vacuumed in {:.1?}", t.elapsed());
    eprintln!("filled in {:.1?}", started.elapsed());
    Ok(peers)
}

#[derive(Clone, Copy, Debug)]
enum List {
    Folder(i32),
    Filter(i32),
}

fn request(list: List, after: Option<&Dialog>, hash: i64) -> GetDialogsRequest {
    let (folder_id, filter_id) = match list {
        List::Folder(f) => (f, 0),
        List::Filter(f) => (0, f),
    };
    GetDialogsRequest {
        offset_date: after.map_or(0, |d| d.top_message_date),
        offset_id: after.map_or(0, |d| d.top_message_id),
        offset_peer: after.and_then(|d| d.peer),
        offset_pinned: after.is_some_and(|d| d.pinned),
        limit: PAGE,
        folder_id,
        filter_id,
        hash,
        include_empty: false,
    }
}

/// A slice holds what a client shows: a top message for each dialog, and its peer.
fn check_slice(slice: &DialogsSlice) -> anyhow::Result<()> {
    let users: HashSet<i64> = slice.users.iter().map(|u| u.id).collect();
    anyhow::ensure!(
        slice.messages.len() == slice.dialogs.len(),
        "a top message for every dialog"
    );
    anyhow::ensure!(
        slice.dialogs.iter().all(|d| users.contains(&d.peer_user())),
        "every dialog's peer among the users"
    );
    Ok(())
}

/// The kinds of call measured, in the order they are shown.
const KINDS: [&str; 6] = [
    "main list",
    "archive",
    "filters",
    "first pages",
    "first pages, not modified",
    "GetPeerDialogs (100 peers)",
];

/// Latencies by kind of call, in the order of `KINDS`.
#[derive(Default)]
struct Kinds(Vec<(&'static str, Vec<Duration>, usize)>);

impl Kinds {
    fn add(&mut self, kind: &'static str, took: Duration, dialogs: usize) {
        match self.0.iter_mut().find(|(k, _, _)| *k == kind) {
            Some((_, times, listed)) => {
                times.push(took);
                *listed += dialogs;
            }
            None => {
                self.0.push((kind, vec![took], dialogs));
                self.0
                    .sort_by_key(|(k, _, _)| KINDS.iter().position(|known| known == k));
            }
        }
    }
}

/// One kind's figures: (kind, calls, p50, p99, max in ms, dialogs a call).
type Row = (&'static str, usize, f64, f64, f64, f64);

fn row(kind: &'static str, mut times: Vec<Duration>, listed: usize) -> Row {
    times.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (
        kind,
        times.len(),
        ms(percentile(&times, 0.50)),
        ms(percentile(&times, 0.99)),
        ms(percentile(&times, 1.0)),
        listed as f64 / times.len() as f64,
    )
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let (mut config, ground) = System::config().await?;
    // The services' own pool size, not the suites' smaller one.
    config.db_pool_size = 16;
    config.telemetry.log_filter = "warn".into();
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let mut owner = system.device().await?;
    owner.sign_up("19010000000", "Owner").await?;
    let peers = fill(&system, &owner, &a).await?;
    let p = Peers(&peers);

    let mut lists = vec![("main list", List::Folder(0)), ("archive", List::Folder(1))];
    lists.extend((0..a.filters).map(|i| ("filters", List::Filter(2 + i as i32))));
    // Warm up: the connections, the statements' plans, the caches.
    for (_, list) in &lists {
        check_slice(&owner.get_dialogs(request(*list, None, 0)).await?)?;
    }
    let load_before = load();
    let mut kinds = Kinds::default();
    let mut pages = 0usize;
    for round in 0..a.rounds {
        for (kind, list) in &lists {
            let mut after: Option<Dialog> = None;
            loop {
                let t = Instant::now();
                let slice = owner.get_dialogs(request(*list, after.as_ref(), 0)).await?;
                let took = t.elapsed();
                check_slice(&slice)?;
                pages += 1;
                kinds.add(kind, took, slice.dialogs.len());
                if after.is_none() {
                    kinds.add("first pages", took, slice.dialogs.len());
                    // The same first page again, with its hash: the client holds it.
                    let t = Instant::now();
                    let again = owner.get_dialogs(request(*list, None, slice.hash)).await?;
                    kinds.add("first pages, not modified", t.elapsed(), 0);
                    anyhow::ensure!(again.not_modified, "an unchanged page hashes alike");
                }
                if slice.dialogs.len() < PAGE as usize {
                    break;
                }
                after = slice.dialogs.last().cloned();
            }
        }
        // GetPeerDialogs for 100 peers at a time, spread over the list.
        for k in 0..a.peer_calls {
            let start = (round * a.peer_calls + k) * 397;
            let asked = (0..100).map(|j| p.input(start + j * 7)).collect();
            let t = Instant::now();
            let slice = owner.get_peer_dialogs(asked).await?;
            let took = t.elapsed();
            check_slice(&slice)?;
            anyhow::ensure!(slice.dialogs.len() == 100, "a dialog with every peer asked");
            kinds.add("GetPeerDialogs (100 peers)", took, slice.dialogs.len());
        }
    }
    let load_after = load();

    let mut rows = Vec::new();
    let (mut every_page, mut every_call) = (Vec::new(), Vec::new());
    let (mut page_dialogs, mut call_dialogs) = (0, 0);
    for (kind, times, listed) in kinds.0 {
        if matches!(kind, "main list" | "archive" | "filters") {
            every_page.extend(times.iter().copied());
            page_dialogs += listed;
        }
        if kind != "first pages" {
            every_call.extend(times.iter().copied());
            call_dialogs += listed;
        }
        rows.push(row(kind, times, listed));
    }
    rows.push(row("every GetDialogs page", every_page, page_dialogs));
    rows.push(row("every call", every_call, call_dialogs));
    println!(
        "{} dialogs ({} pinned, {} filters), {} rounds, {pages} pages; load average {load_before} \
         before, {load_after} after",
        a.dialogs, a.pinned, a.filters, a.rounds
    );
    for (kind, calls, p50, p99, max, listed) in &rows {
        println!(
            "{kind:<28} {calls:>5} calls: p50 {p50:>7.2} ms  p99 {p99:>7.2} ms  max {max:>7.2} ms  \
             ({listed:.0} dialogs a call)"
        );
    }
    let json: Vec<String> = rows
        .iter()
        .map(|(kind, calls, p50, p99, max, _)| {
            format!(
                r#"{{"kind":"{kind}","calls":{calls},"p50_ms":{p50:.2},"p99_ms":{p99:.2},"max_ms":{max:.2}}}"#
            )
        })
        .collect();
    println!(
        r#"{{"dialogs":{},"pinned":{},"filters":{},"rounds":{},"pages":{pages},"load_before":"{load_before}","load_after":"{load_after}","kinds":[{}]}}"#,
        a.dialogs,
        a.pinned,
        a.filters,
        a.rounds,
        json.join(",")
    );
    Ok(())
}
