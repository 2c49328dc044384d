//! One gateway at scale, in one run: `--devices` devices (spread over `--accounts` accounts,
//! sharing `--connections` HTTP/2 connections) each hold an idle update stream, and the
//! gateway's resident memory is measured before and after (per stream); then every stream
//! drops, each account gets `--behind` new messages, and all the devices reconnect at once
//! from where they were (a reconnect storm) while `--pairs` pairs of other users send in
//! closed loops, each device a task of its own and the load on a thread, a runtime and
//! connections of its own. Prints the memory per stream, each device's
//! time to converge (p50/p99/max) from the storm's start and from when the gateway let it in
//! (its last opening not turned away with a wait), the paced retries and the errors (by what
//! failed and its code), and the concurrent sends' latency against the same load on a quiet
//! system, then a JSON line (`--storm 0`: the idle streams only; `--catch-ups N`: the
//! gateway's `streams.max_concurrent_catch_up`; `--catch-up-rate N`: its
//! `streams.catch_ups_per_second`; `--catch-up-line N`: its `streams.catch_up_line`, 0 for
//! none). A device waiting in the gateway's line counts as let in: its time once let in
//! includes the wait. The gateway runs as its own process.
//!
//! ```sh
//! OXIGRAM_TEST_INFRA=local cargo run --release -p oxigram-tests --example stream_scale -- \
//!     [--devices 10000] [--accounts 100] [--connections 100] [--behind 100] [--pairs 4] \
//!     [--load-secs 10] [--storm 1] [--catch-ups 2] [--catch-up-rate 0] [--catch-up-line 16384]
//! ```

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use futures::{StreamExt, stream};
use oxigram::Target;
use oxigram_client::{AuthKey, Client, Event, State, StreamOptions, UpdateStream};
use oxigram_proto::{
    api::v1::{SendMessageRequest, stream_event},
    types::v1::InputPeer,
};
use oxigram_tests::{LOGIN_CODE, Mode, System, rss_kib};
use tokio::time::Instant;

struct Args {
    devices: usize,
    accounts: usize,
    connections: usize,
    behind: usize,
    pairs: usize,
    load_secs: u64,
    /// 0: measure the idle streams only.
    storm: u64,
    /// The gateway's `streams.max_concurrent_catch_up` (0: its default).
    catch_ups: usize,
    /// The gateway's `streams.catch_ups_per_second` (0: no rate).
    catch_up_rate: u32,
    /// The gateway's `streams.catch_up_line` (None: its default).
    catch_up_line: Option<usize>,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        devices: 10_000,
        accounts: 100,
        connections: 100,
        behind: 100,
        pairs: 4,
        load_secs: 10,
        storm: 1,
        catch_ups: 0,
        catch_up_rate: 0,
        catch_up_line: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value: u64 = it.next().context("a value after each flag")?.parse()?;
        match flag.as_str() {
            "--devices" => a.devices = value as usize,
            "--accounts" => a.accounts = value as usize,
            "--connections" => a.connections = value as usize,
            "--behind" => a.behind = value as usize,
            "--pairs" => a.pairs = value as usize,
            "--load-secs" => a.load_secs = value,
            "--storm" => a.storm = value,
            "--catch-ups" => a.catch_ups = value as usize,
            "--catch-up-rate" => a.catch_up_rate = u32::try_from(value)?,
            "--catch-up-line" => a.catch_up_line = Some(value as usize),
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    anyhow::ensure!(
        a.accounts > 0 && a.devices >= a.accounts && a.connections > 0,
        "at least one device per account, and a connection"
    );
    Ok(a)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

/// The wait before trying again after an error with this code: what a `FLOOD_WAIT_<seconds>`
/// asks for, half a second after `SERVICE_UNAVAILABLE` (the gateway or a service behind it
/// was busy or restarting); `None` for an error a retry does not mend.
fn flood_wait(code: &str) -> Option<Duration> {
    if code == "SERVICE_UNAVAILABLE" {
        return Some(Duration::from_millis(500));
    }
    let secs = code.strip_prefix("FLOOD_WAIT_")?.parse().ok()?;
    Some(Duration::from_secs(secs))
}

fn phone(account: usize) -> String {
    format!("1902{account:06}")
}

/// A device of one account, on a shared connection.
struct Device {
    account: usize,
    client: Client,
}

/// Closed-loop sends of pair i (user 2i to user 2i+1) until `stop`; every send's latency.
async fn load(
    users: &[Client],
    ids: &[i64],
    stop: &AtomicBool,
    seq: &AtomicU64,
) -> anyhow::Result<Vec<Duration>> {
    let loops = (0..users.len() / 2).map(|i| {
        let (from, to) = (&users[2 * i], ids[2 * i + 1]);
        async move {
            let mut took = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let random_id = seq.fetch_add(1, Ordering::Relaxed) as i64 + 1;
                let start = Instant::now();
                from.send_message(SendMessageRequest {
                    peer: Some(InputPeer::user(to)),
                    random_id,
                    text: "load".into(),
                    ..Default::default()
                })
                .await?;
                took.push(start.elapsed());
            }
            anyhow::Ok(took)
        }
    });
    let mut all = Vec::new();
    for took in futures::future::join_all(loops).await {
        all.extend(took?);
    }
    all.sort();
    Ok(all)
}

/// The load's senders: their auth keys and user ids.
#[derive(Clone)]
struct Senders {
    gateway: String,
    keys: Vec<AuthKey>,
    ids: Vec<i64>,
}

/// [`load`] apart from the devices, as other people's phones: on a thread and a runtime of its
/// own, over connections of its own, until `stop`. On the devices' runtime a send's answer
/// would wait behind thousands of device tasks of this process, a queue of the bench's own
/// rather than the gateway's.
fn load_apart(
    senders: Senders,
    stop: Arc<AtomicBool>,
    seq: Arc<AtomicU64>,
) -> std::thread::JoinHandle<anyhow::Result<Vec<Duration>>> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let mut users = Vec::with_capacity(senders.keys.len());
            for key in senders.keys {
                let channel = oxigram_client::connect(&senders.gateway).await?;
                users.push(Client::new(channel, key)?);
            }
            load(&users, &senders.ids, &stop, &seq).await
        })
    })
}

/// Waits for a [`load_apart`] without holding up this runtime.
async fn joined(
    load: std::thread::JoinHandle<anyhow::Result<Vec<Duration>>>,
) -> anyhow::Result<Vec<Duration>> {
    tokio::task::spawn_blocking(move || {
        load.join()
            .map_err(|_| anyhow::anyhow!("the load's thread panicked"))?
    })
    .await?
}

/// The pts of each account's log, once it is at least `at_least` for every one.
async fn account_pts(
    devices: &[Device],
    heads: &[usize],
    at_least: &[i32],
) -> anyhow::Result<Vec<i32>> {
    oxigram_tests::eventually(Duration::from_secs(120), "every account's log", || async {
        let mut pts = Vec::with_capacity(heads.len());
        for (a, head) in heads.iter().enumerate() {
            let state = devices[*head].client.get_state().await?;
            if state.pts < at_least[a] {
                return Ok(None);
            }
            pts.push(state.pts);
        }
        Ok(Some(pts))
    })
    .await
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let (mut config, ground) = System::config().await?;
    config.telemetry.log_filter = "warn".into();
    config.db_pool_size = 16;
    // The bench logs many devices into few accounts, and every one opens streams.
    config.limits.sign_in_per_phone = 1_000_000;
    config.limits.send_code_per_phone = 1_000_000;
    config.limits.stream_opens_per_device = 1_000_000;
    config.limits.difference_per_device = 1_000_000;
    config.streams.idle_timeout_secs = 0;
    if a.catch_ups > 0 {
        config.streams.max_concurrent_catch_up = a.catch_ups;
    }
    config.streams.catch_ups_per_second = a.catch_up_rate;
    if let Some(line) = a.catch_up_line {
        config.streams.catch_up_line = line;
    }
    let logs = ground.dir.clone();
    let system = System::start_with(config, ground, Mode::Processes).await?;
    let outcome = run(&a, &system).await;
    if outcome.is_err() {
        // The services' logs go with the system: say where they were before they do.
        for name in ["gateway", "updates", "messages", "dispatch"] {
            let log = std::fs::read_to_string(logs.join(format!("{name}.log"))).unwrap_or_default();
            let tail: Vec<&str> = log
                .lines()
                .rev()
                .filter(|l| {
                    l.contains("internal error")
                        || l.contains("\"ERROR\"") && !l.contains("response failed")
                })
                .take(5)
                .collect();
            eprintln!("{name}.log, last lines: {tail:#?}");
        }
    }
    outcome
}

async fn run(a: &Args, system: &System) -> anyhow::Result<()> {
    let gateway = system.gateway();
    let gateway_pid = system
        .pid(Target::Gateway)
        .context("the gateway's process")?;

    // The accounts' devices, a few hundred streams to a connection.
    let mut connections = Vec::with_capacity(a.connections);
    for _ in 0..a.connections {
        connections.push(oxigram_client::connect(&gateway).await?);
    }
    let per_account = a.devices / a.accounts;
    let made = Instant::now();
    // Each account's first device signs it up; then the others sign in.
    let device = |i: usize| {
        let channel = connections[i % connections.len()].clone();
        let account = i / per_account;
        async move {
            let client = Client::create(channel, "scale").await?;
            let login = client.request_code(&phone(account)).await?;
            if i.is_multiple_of(per_account) {
                client.sign_up(&login, LOGIN_CODE, "Scale").await?;
            } else {
                client.sign_in(&login, LOGIN_CODE).await?;
            }
            anyhow::Ok((i, Device { account, client }))
        }
    };
    let mut devices: Vec<(usize, Device)> = Vec::with_capacity(a.accounts * per_account);
    for phase in [
        (0..a.accounts)
            .map(|acc| acc * per_account)
            .collect::<Vec<_>>(),
        (0..a.accounts * per_account)
            .filter(|i| !i.is_multiple_of(per_account))
            .collect(),
    ] {
        let made: Vec<(usize, Device)> = stream::iter(phase)
            .map(device)
            .buffer_unordered(64)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()
            .context("signing the devices in")?;
        devices.extend(made);
    }
    devices.sort_by_key(|(i, _)| *i);
    let devices: Vec<Device> = devices.into_iter().map(|(_, d)| d).collect();
    let heads: Vec<usize> = (0..a.accounts).map(|acc| acc * per_account).collect();
    let mut account_ids = Vec::with_capacity(a.accounts);
    for head in &heads {
        account_ids.push(devices[*head].client.get_me().await?.id);
    }
    eprintln!(
        "{} devices of {} accounts signed in over {} connections in {:.1} s",
        devices.len(),
        a.accounts,
        a.connections,
        made.elapsed().as_secs_f64()
    );

    // The sender of the missed messages, and the load's pairs.
    let mut sender = system.device().await?;
    sender.sign_up("19030000", "Sender").await?;
    let mut users = Vec::with_capacity(2 * a.pairs);
    for i in 0..2 * a.pairs {
        let mut u = system.device().await?;
        u.sign_up(&format!("1904{i:06}"), "Load").await?;
        users.push(u);
    }
    let user_ids: Vec<i64> = users
        .iter()
        .map(|u| u.user_id())
        .collect::<Result<_, _>>()?;
    // Every account has a dialog with the sender and a pts above 0 to resume from.
    let sender = &sender;
    stream::iter(account_ids.iter().enumerate())
        .map(|(i, id)| async move { sender.send(*id, i as i64 + 1, "hello").await })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .context("the first messages")?;
    let start_pts = account_pts(&devices, &heads, &vec![1; a.accounts]).await?;

    // Idle streams: the gateway's memory before and after every device holds one.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_before, _) = rss_kib(gateway_pid)?;
    let opened = Instant::now();
    let idle = stream::iter(devices.iter())
        .map(|d| {
            let pts = start_pts[d.account];
            async move {
                'open: loop {
                    let mut s = match d.client.open_stream(pts).await {
                        Ok(s) => s,
                        // Shed by the gateway's admission control: come back when told.
                        Err(error) => match flood_wait(&error.code()) {
                            Some(wait) => {
                                tokio::time::sleep(wait).await;
                                continue 'open;
                            }
                            None => return Err(error.into()),
                        },
                    };
                    // Registered once the (empty) replay is over; past the gateway's catch-up
                    // cap it says when to come back instead.
                    loop {
                        let event = tokio::time::timeout(Duration::from_secs(60), s.message())
                            .await
                            .context("no end of replay within 60 s")?;
                        let event = match event {
                            Ok(event) => event.context("the stream ended")?,
                            Err(status) => {
                                let code = oxigram_errors::code_of(&status).unwrap_or_default();
                                let wait = flood_wait(&code).ok_or(status)?;
                                tokio::time::sleep(wait).await;
                                continue 'open;
                            }
                        };
                        match event.kind {
                            Some(stream_event::Kind::CaughtUp(_)) => return anyhow::Ok(s),
                            Some(stream_event::Kind::RetryAfter(r)) => {
                                let wait = Duration::from_millis(r.retry_after_ms.into());
                                tokio::time::sleep(wait).await;
                                continue 'open;
                            }
                            _ => {}
                        }
                    }
                }
            }
        })
        // Phones coming online a few at a time, not a storm: that is measured next.
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .context("opening the idle streams")?;
    let open_secs = opened.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (rss_idle, _) = rss_kib(gateway_pid)?;
    let per_stream_kib = (rss_idle.saturating_sub(rss_before)) as f64 / idle.len() as f64;
    eprintln!(
        "{} idle streams opened in {open_secs:.1} s: gateway RSS {rss_before} KiB -> {rss_idle} KiB, {per_stream_kib:.2} KiB a stream",
        idle.len()
    );
    drop(idle);
    if a.storm == 0 {
        println!(
            "{}",
            serde_json::json!({
                "devices": devices.len(),
                "idle_rss_before_kib": rss_before,
                "idle_rss_after_kib": rss_idle,
                "idle_kib_per_stream": per_stream_kib,
            })
        );
        return Ok(());
    }

    // The quiet figure of the load.
    let senders = Senders {
        gateway: gateway.clone(),
        keys: users.iter().map(|u| u.auth_key().clone()).collect(),
        ids: user_ids.clone(),
    };
    let seq = Arc::new(AtomicU64::new(1_000_000));
    let stop = Arc::new(AtomicBool::new(false));
    let quiet = {
        let load = load_apart(senders.clone(), stop.clone(), seq.clone());
        tokio::time::sleep(Duration::from_secs(a.load_secs)).await;
        stop.store(true, Ordering::Relaxed);
        joined(load).await?
    };

    // While the devices are away, each account gets `behind` messages.
    let missed = Instant::now();
    stream::iter((0..a.behind).flat_map(|n| account_ids.iter().map(move |id| (n, *id))))
        .map(|(n, id)| async move {
            sender
                .send(id, 10_000 + (n as i64) * 100_000 + id, "while away")
                .await
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let wanted: Vec<i32> = start_pts.iter().map(|p| p + a.behind as i32).collect();
    let targets = account_pts(&devices, &heads, &wanted).await?;
    eprintln!(
        "{} messages sent to the accounts in {:.1} s",
        a.behind * a.accounts,
        missed.elapsed().as_secs_f64()
    );

    // The storm: every device reopens at once from where it was, under the same load.
    let stop = Arc::new(AtomicBool::new(false));
    let paced = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    // The storm's failures by where they happened and their code, to see what to fix.
    let failures: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    fn failed(failures: &Mutex<BTreeMap<String, u64>>, during: &str, code: String) {
        let mut f = failures.lock().unwrap_or_else(PoisonError::into_inner);
        *f.entry(format!("{during} {code}")).or_default() += 1;
    }
    let storm_start = Instant::now();
    let options = StreamOptions {
        gap_wait: Duration::from_secs(30),
        ..StreamOptions::default()
    };
    let storm = devices.iter().map(|d| {
        let (paced, errors, failures) = (paced.clone(), errors.clone(), failures.clone());
        let (from, target) = (start_pts[d.account], targets[d.account]);
        let client = d.client.clone();
        // A device is a phone of its own: its own task, so neither the other devices' work
        // nor the load's waits on it.
        tokio::spawn(async move {
            let saved = State { pts: from, date: 0 };
            let mut updates = loop {
                match UpdateStream::open(client.clone(), saved, options).await {
                    Ok(updates) => break updates,
                    Err(error) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        failed(&failures, "open", error.code());
                        let wait = flood_wait(&error.code()).unwrap_or(Duration::from_millis(500));
                        tokio::time::sleep(wait).await;
                    }
                }
            };
            // Since the gateway let this device in: its last opening that was not turned
            // away with a wait (failures after it count in its time).
            let mut admitted = Some(Instant::now());
            while updates.state().pts < target {
                let event = tokio::time::timeout(Duration::from_secs(120), updates.next())
                    .await
                    .context("a device made no progress for 120 s")?;
                match event {
                    Event::Paced { .. } => {
                        paced.fetch_add(1, Ordering::Relaxed);
                        admitted = None;
                    }
                    Event::Resumed { .. } => {
                        admitted.get_or_insert_with(Instant::now);
                    }
                    Event::Failed { during, error } => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        failed(&failures, &format!("{during:?}"), error.code());
                    }
                    Event::TooLong { pts } => anyhow::bail!("too long at {pts}"),
                    _ => {}
                }
            }
            let served = admitted.map_or(Duration::ZERO, |at| at.elapsed());
            anyhow::Ok((storm_start.elapsed(), served))
        })
    });
    let load = load_apart(senders, stop.clone(), seq);
    let outcome = futures::future::join_all(storm).await;
    stop.store(true, Ordering::Relaxed);
    let during = joined(load).await?;
    let outcome: Vec<(Duration, Duration)> = outcome
        .into_iter()
        .map(|joined| joined.context("a device's task")?)
        .collect::<Result<_, _>>()?;
    let (mut converged, mut served): (Vec<Duration>, Vec<Duration>) = outcome.into_iter().unzip();
    converged.sort();
    served.sort();
    let (paced, errors) = (
        paced.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
    );
    let failures = failures
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();

    let report = serde_json::json!({
        "devices": devices.len(),
        "accounts": a.accounts,
        "connections": a.connections,
        "idle_rss_before_kib": rss_before,
        "idle_rss_after_kib": rss_idle,
        "idle_kib_per_stream": per_stream_kib,
        "behind": a.behind,
        "catch_ups_per_second": a.catch_up_rate,
        "catch_up_line": a.catch_up_line,
        "catch_up_p50_ms": percentile(&converged, 0.50),
        "catch_up_p99_ms": percentile(&converged, 0.99),
        "catch_up_max_ms": percentile(&converged, 1.0),
        "served_p50_ms": percentile(&served, 0.50),
        "served_p99_ms": percentile(&served, 0.99),
        "served_max_ms": percentile(&served, 1.0),
        "paced_retries": paced,
        "errors": errors,
        "errors_by_kind": failures,
        "quiet_sends": quiet.len(),
        "quiet_send_p50_ms": percentile(&quiet, 0.50),
        "quiet_send_p99_ms": percentile(&quiet, 0.99),
        "storm_sends": during.len(),
        "storm_send_p50_ms": percentile(&during, 0.50),
        "storm_send_p99_ms": percentile(&during, 0.99),
    });
    eprintln!(
        "storm: {} devices converged, catch-up p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; {paced} paced retries, {errors} errors",
        converged.len(),
        percentile(&converged, 0.50),
        percentile(&converged, 0.99),
        percentile(&converged, 1.0)
    );
    eprintln!(
        "  once let in: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        percentile(&served, 0.50),
        percentile(&served, 0.99),
        percentile(&served, 1.0)
    );
    eprintln!(
        "sends: quiet p50 {:.1} / p99 {:.1} ms ({}), during the storm p50 {:.1} / p99 {:.1} ms ({})",
        percentile(&quiet, 0.50),
        percentile(&quiet, 0.99),
        quiet.len(),
        percentile(&during, 0.50),
        percentile(&during, 0.99),
        during.len()
    );
    for (kind, n) in &failures {
        eprintln!("  failed: {kind}: {n}");
    }
    println!("{report}");
    Ok(())
}
