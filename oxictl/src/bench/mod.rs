//! `oxictl bench`: a load generator that drives a running system through the gateway's client
//! API over real gRPC, then measures update catch-up, getDifference latency, the dispatch
//! drain rate, and a raw-Postgres baseline of the same work.
//!
//! Phases: setup (users, online and offline devices) → send phase (closed or open loop, with
//! push latency, duplicates and losses observed on the recipients' online streams) → offline
//! catch-up → getDifference latency → dispatch drain → Postgres baseline. The last line of
//! stdout is one JSON object with the results.
//!
//! Everything is bounded: every unary call has a 5 s deadline, every phase a time cap, the
//! whole run a hard cap, and the number of tasks is the number of senders plus one per user.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fmt::Display,
    future::Future,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, anyhow, bail};
use clap::Args;
use futures::{StreamExt, stream};
use oxigram_proto::{
    api::v1::{
        CreateAuthKeyRequest, Difference, GetDifferenceRequest, GetStateRequest, SendCodeRequest,
        SendMessageRequest, SignInRequest, SignUpRequest, StreamEvent, StreamRequest,
        auth_client::AuthClient, messages_client::MessagesClient, stream_event,
        updates_client::UpdatesClient,
    },
    dispatch::v1::{EnqueueRequest, dispatch_client::DispatchClient},
    types::v1::{Message, PtsUpdate, PushJob, Update, UpdateNewMessage, update},
};
use serde_json::{Value, json};
use sqlx::{PgPool, postgres::PgPoolOptions};
use tokio::{
    sync::{mpsc, oneshot, watch},
    task::JoinHandle,
    time::Instant,
};
use tonic::{
    Request, Status, Streaming,
    service::interceptor::InterceptedService,
    transport::{Channel, Endpoint},
};

use oxictl::device::SignWithKey;

mod baseline;
mod device;
mod drain;
mod sender;
mod stalls;
mod stats;
mod steal;

use device::*;
use sender::*;
use stats::*;

/// Deadline of every unary call.
const RPC_DEADLINE: Duration = Duration::from_secs(5);
/// How long a pts gap may persist before the device fills it with getDifference.
const GAP_WAIT: Duration = Duration::from_secs(1);
/// How long after the send phase a persisted message may take to reach its recipient.
const GRACE: Duration = Duration::from_secs(10);
/// Concurrent calls during setup, offline catch-up and state reads.
const SETUP_CONCURRENCY: usize = 8;
/// Devices sharing one HTTP/2 connection to the gateway.
const DEVICES_PER_CHANNEL: usize = 4;
const MAX_CHANNELS: usize = 32;
/// The login code `oxigram up` must be started with (OXIGRAM_GATEWAY__FIXED_LOGIN_CODE).
const LOGIN_CODE: &str = "12345";
/// Slice size of every getDifference the bench makes.
const DIFF_LIMIT: i32 = 100;
/// getDifference calls measured in phase 4.
const DIFF_CALLS: usize = 200;
/// Jobs per Dispatch.Enqueue call, and concurrent Enqueue calls, in the drain phase.
const DRAIN_BATCH: usize = 500;
const DRAIN_CONCURRENCY: usize = 4;
const DRAIN_CAP: Duration = Duration::from_secs(150);

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Users to create (each with one online device).
    #[arg(long, default_value_t = 50)]
    users: usize,
    /// Concurrent senders.
    #[arg(long, default_value_t = 32)]
    senders: usize,
    /// Seconds of the measured send phase (also the baseline's length).
    #[arg(long, default_value_t = 20)]
    duration: u64,
    /// Seconds of sending before measuring starts.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Share of users with a second device that stays offline and catches up at the end.
    #[arg(long, default_value_t = 0.2)]
    offline_fraction: f64,
    /// Open loop: target sends/s across all senders (default: closed loop, as fast as answered).
    #[arg(long)]
    rate: Option<f64>,
    /// The system's Postgres, for the drain measurement and the baseline.
    #[arg(long, default_value = "postgres://oxigram@127.0.0.1:55432/oxigram")]
    database_url: String,
    /// svc-dispatch's internal endpoint.
    #[arg(long, default_value = "http://127.0.0.1:7714")]
    dispatch: String,
    /// Push jobs to pre-fill dispatch's backlog with (0 skips the drain phase).
    #[arg(long, default_value_t = 20_000)]
    drain_jobs: usize,
    /// Print only the JSON line.
    #[arg(long)]
    json_only: bool,
}

impl BenchArgs {
    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            (2..=5000).contains(&self.users),
            "--users must be within 2..=5000"
        );
        anyhow::ensure!(
            (1..=1024).contains(&self.senders),
            "--senders must be within 1..=1024"
        );
        anyhow::ensure!(
            (1..=600).contains(&self.duration),
            "--duration must be within 1..=600"
        );
        anyhow::ensure!(self.warmup <= 60, "--warmup must be at most 60");
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.offline_fraction),
            "--offline-fraction must be within 0..=1"
        );
        if let Some(rate) = self.rate {
            anyhow::ensure!(
                rate > 0.0 && rate <= 100_000.0,
                "--rate must be within (0, 100000]"
            );
        }
        anyhow::ensure!(
            self.drain_jobs <= 1_000_000,
            "--drain-jobs must be at most 1000000"
        );
        Ok(())
    }

    /// The longest the whole run may take: the sum of every phase's cap.
    fn hard_cap(&self) -> Duration {
        let setup = 60 + self.users as u64 / 5;
        let send = self.warmup + self.duration + 2 * RPC_DEADLINE.as_secs() + GRACE.as_secs();
        let stop = 30;
        let checks = 120 + 60;
        Duration::from_secs(setup + send + stop + checks + DRAIN_CAP.as_secs() + self.duration + 60)
    }

    fn offline_devices(&self) -> usize {
        ((self.users as f64) * self.offline_fraction).round() as usize
    }
}

/// Progress lines (suppressed by --json-only).
struct Out {
    quiet: bool,
}

impl Out {
    fn line(&self, text: impl Display) {
        if !self.quiet {
            println!("{text}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

pub async fn run(gateway: &str, args: BenchArgs) -> anyhow::Result<()> {
    args.validate()?;
    let cap = args.hard_cap();
    let wall = Instant::now();
    let out = Out {
        quiet: args.json_only,
    };
    let mut summary = tokio::time::timeout(cap, bench(gateway, &args, &out))
        .await
        .map_err(|_| anyhow!("the bench exceeded its hard cap of {}s", cap.as_secs()))??;
    let wall_s = round3(wall.elapsed().as_secs_f64());
    if let Some(obj) = summary.as_object_mut() {
        obj.insert("wall_s".into(), json!(wall_s));
    }
    out.line(format!("wall time {wall_s:.1}s"));
    println!("{}", serde_json::to_string(&summary)?);
    Ok(())
}

async fn connect_channels(gateway: &str, n: usize) -> anyhow::Result<Vec<Channel>> {
    let endpoint = Endpoint::from_shared(gateway.to_owned())?
        .connect_timeout(RPC_DEADLINE)
        .tcp_nodelay(true);
    let mut channels = Vec::with_capacity(n);
    for _ in 0..n {
        channels.push(
            endpoint
                .connect()
                .await
                .with_context(|| format!("cannot reach the gateway at {gateway}"))?,
        );
    }
    Ok(channels)
}

async fn setup_users(
    channels: &[Channel],
    args: &BenchArgs,
    run: &str,
    phone_prefix: u32,
) -> anyhow::Result<Vec<BenchUser>> {
    let offline = args.offline_devices();
    let made = stream::iter(0..args.users)
        .map(|i| {
            let online_ch = channels[(2 * i) % channels.len()].clone();
            let offline_ch = channels[(2 * i + 1) % channels.len()].clone();
            let phone = format!("9{phone_prefix:06}{i:05}");
            async move {
                let online = Dev::create(online_ch, &format!("bench/{run}/online")).await?;
                let id = online.login(&phone, true).await?;
                let offline = if i < offline {
                    let dev = Dev::create(offline_ch, &format!("bench/{run}/offline")).await?;
                    let same = dev.login(&phone, false).await?;
                    anyhow::ensure!(same == id, "signing in gave another user");
                    Some(dev)
                } else {
                    None
                };
                anyhow::Ok(BenchUser {
                    id,
                    online,
                    offline,
                })
            }
        })
        .buffered(SETUP_CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    made.into_iter().collect()
}

async fn bench(gateway: &str, args: &BenchArgs, out: &Out) -> anyhow::Result<Value> {
    let run = format!("{:08x}", rand::random::<u32>());
    let phone_prefix = rand::random_range(0..1_000_000u32);
    let mut errors = Errors::default();
    let mut json = serde_json::Map::new();
    out.line(format!(
        "oxictl bench {run}: {} users ({} with an offline device), {} senders, {}s warmup + {}s send phase, {} against {gateway}",
        args.users,
        args.offline_devices(),
        args.senders,
        args.warmup,
        args.duration,
        args.rate
            .map_or("closed loop".to_owned(), |r| format!("open loop at {r}/s")),
    ));

    // 1. Setup ------------------------------------------------------------------------------
    let t_setup = Instant::now();
    let devices = args.users + args.offline_devices();
    let channels = connect_channels(
        gateway,
        devices.div_ceil(DEVICES_PER_CHANNEL).clamp(1, MAX_CHANNELS),
    )
    .await?;
    let users = tokio::time::timeout(
        Duration::from_secs(60 + args.users as u64 / 5),
        setup_users(&channels, args, &run, phone_prefix),
    )
    .await
    .map_err(|_| anyhow!("setup timed out"))??;
    let users = Arc::new(users);
    let shared = Arc::new(Shared {
        run: run.clone(),
        t0: Instant::now(),
        wall0: chrono::Utc::now(),
        received: Mutex::new(HashSet::new()),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut own_txs = Vec::with_capacity(users.len());
    let mut device_tasks: Vec<JoinHandle<DeviceReport>> = Vec::with_capacity(users.len());
    let mut readies = Vec::with_capacity(users.len());
    for (i, u) in users.iter().enumerate() {
        let (tx, rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = oneshot::channel();
        own_txs.push(tx);
        readies.push(ready_rx);
        device_tasks.push(tokio::spawn(device_task(
            i,
            u.online.clone(),
            shared.clone(),
            rx,
            stop_rx.clone(),
            ready_tx,
        )));
    }
    for ready in readies {
        match tokio::time::timeout(RPC_DEADLINE * 2, ready).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(code))) => bail!("cannot open an update stream: {code}"),
            _ => bail!("an update stream did not open in time"),
        }
    }
    out.line(format!(
        "setup: {} users, {} offline devices, {} connections, streams open in {:.1}s",
        users.len(),
        users.iter().filter(|u| u.offline.is_some()).count(),
        channels.len(),
        t_setup.elapsed().as_secs_f64()
    ));

    // 2. Send phase ---------------------------------------------------------------------------
    let start = Instant::now();
    let warm_end = start + Duration::from_secs(args.warmup);
    let end = warm_end + Duration::from_secs(args.duration);
    let ctx = Arc::new(SendCtx {
        shared: shared.clone(),
        users: users.clone(),
        own: own_txs,
        seq: AtomicU64::new(0),
        start,
        end,
        senders: args.senders,
        rate: args.rate,
    });
    // The machine's CPU times every 100 ms while the senders run.
    let timeline = Arc::new(Mutex::new(steal::Timeline::default()));
    let sampler = tokio::spawn({
        let (timeline, shared) = (timeline.clone(), shared.clone());
        async move {
            let mut tick = tokio::time::interval(steal::SAMPLE_EVERY);
            loop {
                tick.tick().await;
                if let Ok(mut t) = timeline.lock() {
                    t.record(shared.now_us());
                }
            }
        }
    });
    let senders: Vec<JoinHandle<SenderReport>> = (0..args.senders)
        .map(|w| tokio::spawn(sender_task(w, ctx.clone())))
        .collect();
    // Progress every 5 s while sending.
    let mut last_seq = 0;
    while Instant::now() < end {
        tokio::time::sleep_until((Instant::now() + Duration::from_secs(5)).min(end)).await;
        let seq = ctx.seq.load(Ordering::Relaxed);
        let received = shared.received.lock().map_or(0, |s| s.len());
        out.line(format!(
            "  t={:>5.1}s sends started {seq} (+{}), received online {received}",
            start.elapsed().as_secs_f64(),
            seq - last_seq
        ));
        last_seq = seq;
    }
    let mut records = Vec::new();
    let mut skipped = 0;
    for s in senders {
        let r = tokio::time::timeout(RPC_DEADLINE * 2, s)
            .await
            .map_err(|_| anyhow!("a sender did not stop"))??;
        records.extend(r.records);
        skipped += r.skipped;
    }
    let send_end = Instant::now();
    sampler.abort();
    let timeline = {
        let mut t = timeline
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default();
        t.record(shared.now_us());
        t
    };
    let steal_pct = timeline.steal_pct(0, u64::MAX);
    let warm_us = warm_end.duration_since(shared.t0).as_micros() as u64;
    let end_us = end.duration_since(shared.t0).as_micros() as u64;
    for r in &records {
        if let Err(code) = &r.outcome {
            errors.add("send", code);
        }
    }
    let persisted: HashMap<u64, &SendRecord> = records
        .iter()
        .filter(|r| r.outcome.is_ok())
        .map(|r| (r.seq, r))
        .collect();
    let mut send_lat: Vec<u64> = records
        .iter()
        .filter(|r| r.outcome.is_ok() && r.start_us >= warm_us)
        .map(|r| r.end_us.saturating_sub(r.start_us))
        .collect();
    send_lat.sort_unstable();
    let (slow_sends, stall_episodes) = stalls::stalls(
        records
            .iter()
            .filter(|r| r.outcome.is_ok() && r.start_us >= warm_us)
            .map(|r| (r.start_us, r.end_us.saturating_sub(r.start_us))),
    );
    let measured_ok = records
        .iter()
        .filter(|r| r.outcome.is_ok() && r.end_us >= warm_us && r.end_us <= end_us)
        .count();
    let sends_per_s = measured_ok as f64 / args.duration as f64;
    out.line(format!(
        "send phase: {} sent, {} persisted, {} errors; {:.1} sends/s measured; latency p50 {} p99 {}",
        records.len(),
        persisted.len(),
        records.len() - persisted.len(),
        sends_per_s,
        fmt_ms(pct_ms(&send_lat, 50.0)),
        fmt_ms(pct_ms(&send_lat, 99.0)),
    ));

    out.line(format!(
        "  sends over {} ms: {slow_sends}, in {} stall episodes; worst: {}",
        stalls::SLOW_SEND.as_millis(),
        stall_episodes.len(),
        stalls::to_json(&stall_episodes, shared.wall0, &timeline)
    ));

    // Grace: every persisted message should reach its recipient's online device.
    let grace_end = send_end + GRACE;
    loop {
        let missing = match shared.received.lock() {
            Ok(set) => persisted.keys().filter(|s| !set.contains(s)).count(),
            Err(_) => bail!("receipt set poisoned"),
        };
        if missing == 0 || Instant::now() >= grace_end {
            out.line(format!(
                "grace: waited {:.1}s, {missing} persisted messages not yet on their recipient's online device",
                send_end.elapsed().as_secs_f64()
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let grace_wait = send_end.elapsed().as_secs_f64();
    let _ = stop_tx.send(true);
    let mut reports = Vec::with_capacity(device_tasks.len());
    for t in device_tasks {
        let r = tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .map_err(|_| anyhow!("a device task did not stop"))??;
        reports.push(r);
    }

    // Delivery accounting on the online devices.
    let mut duplicates = 0u64;
    let mut misrouted = 0u64;
    let mut received_unacked = 0u64;
    let mut push_lat = Vec::new();
    let (mut via_stream, mut via_gap_fill, mut late) = (0u64, 0u64, 0u64);
    let (mut gap_fills, mut diff_needed, mut reconnects, mut discontinuities, mut too_long) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    for rep in &mut reports {
        duplicates += rep.duplicates;
        gap_fills += rep.gap_fills;
        diff_needed += rep.difference_needed;
        reconnects += rep.reconnects;
        discontinuities += rep.discontinuities;
        too_long += rep.too_long;
        errors.merge(std::mem::take(&mut rep.errors));
        for (seq, &(_, latency, via)) in &rep.incoming {
            match persisted.get(seq) {
                Some(r) if r.recipient != rep.user => misrouted += 1,
                Some(r) => {
                    match via {
                        Via::Final => late += 1,
                        Via::GapFill => via_gap_fill += 1,
                        Via::Stream | Via::Own => via_stream += 1,
                    }
                    if via != Via::Final && r.start_us >= warm_us {
                        push_lat.push(latency);
                    }
                }
                None => received_unacked += 1,
            }
        }
    }
    push_lat.sort_unstable();
    // Persisted but not on the online device: is it at least in the recipient's log?
    let mut missing_by_user: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for (seq, r) in &persisted {
        if !reports[r.recipient].incoming.contains_key(seq) {
            missing_by_user.entry(r.recipient).or_default().push(*seq);
        }
    }
    let mut lost_online = 0u64;
    let mut lost_samples = Vec::new();
    for (user, seqs) in &missing_by_user {
        let in_log: HashSet<u64> = match users[*user].online.full_difference(0).await {
            Ok(all) => all
                .iter()
                .filter_map(new_message_of)
                .filter(|m| !m.out)
                .filter_map(|m| parse_text(&run, &m.text).map(|(s, _)| s))
                .collect(),
            Err(code) => {
                errors.add("loss_check", &code);
                HashSet::new()
            }
        };
        for seq in seqs {
            if in_log.contains(seq) {
                late += 1;
            } else {
                lost_online += 1;
                if lost_samples.len() < 10 {
                    lost_samples.push(json!({"seq": seq, "recipient_user_id": users[*user].id}));
                }
            }
        }
    }
    // Outgoing messages should be in the sender's own state too.
    let mut missing_outgoing = 0u64;
    for (seq, r) in &persisted {
        if !reports[r.sender].outgoing.contains_key(seq) {
            missing_outgoing += 1;
        }
    }
    out.line(format!(
        "online devices: {} delivered in grace ({via_stream} by push, {via_gap_fill} by gap fill), {late} late (only by a final getDifference), {lost_online} lost, {duplicates} duplicates, {misrouted} misrouted; push latency p50 {} p99 {}; {gap_fills} gap fills, {diff_needed} difference-needed, {reconnects} reconnects",
        via_stream + via_gap_fill,
        fmt_ms(pct_ms(&push_lat, 50.0)),
        fmt_ms(pct_ms(&push_lat, 99.0)),
    ));

    // 3. Offline catch-up -------------------------------------------------------------------
    let t_off = Instant::now();
    let mut to_user: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut from_user: HashMap<usize, Vec<u64>> = HashMap::new();
    for (seq, r) in &persisted {
        to_user.entry(r.recipient).or_default().push(*seq);
        from_user.entry(r.sender).or_default().push(*seq);
    }
    let offline: Vec<(usize, Dev)> = users
        .iter()
        .enumerate()
        .filter_map(|(i, u)| u.offline.clone().map(|d| (i, d)))
        .collect();
    let caught_up = tokio::time::timeout(
        Duration::from_secs(120),
        stream::iter(offline)
            .map(|(i, dev)| async move { (i, dev.full_difference(0).await) })
            .buffer_unordered(SETUP_CONCURRENCY)
            .collect::<Vec<_>>(),
    )
    .await
    .map_err(|_| anyhow!("offline catch-up timed out"))?;
    let (mut lost_offline, mut offline_updates, mut offline_missing_outgoing) = (0u64, 0u64, 0u64);
    let mut offline_discontinuities = 0u64;
    for (i, outcome) in caught_up {
        let all = match outcome {
            Ok(all) => all,
            Err(code) => {
                errors.add("offline", &code);
                lost_offline += to_user.get(&i).map_or(0, |v| v.len() as u64);
                continue;
            }
        };
        offline_updates += all.len() as u64;
        let mut prev = 0;
        let mut incoming: HashMap<u64, i32> = HashMap::new();
        let mut outgoing: HashSet<u64> = HashSet::new();
        for u in &all {
            if u.pts - u.pts_count != prev {
                offline_discontinuities += 1;
            }
            prev = u.pts;
            let Some(m) = new_message_of(u) else { continue };
            let Some((seq, _)) = parse_text(&run, &m.text) else {
                continue;
            };
            if m.out {
                outgoing.insert(seq);
                continue;
            }
            match incoming.get(&seq) {
                Some(&pts) if pts != u.pts => duplicates += 1,
                Some(_) => {}
                None => {
                    incoming.insert(seq, u.pts);
                }
            }
        }
        for seq in to_user.get(&i).into_iter().flatten() {
            if !incoming.contains_key(seq) {
                lost_offline += 1;
                if lost_samples.len() < 10 {
                    lost_samples.push(
                        json!({"seq": seq, "recipient_user_id": users[i].id, "device": "offline"}),
                    );
                }
            }
        }
        for seq in from_user.get(&i).into_iter().flatten() {
            if !outgoing.contains(seq) {
                offline_missing_outgoing += 1;
            }
        }
    }
    out.line(format!(
        "offline catch-up: {} devices, {offline_updates} updates in {:.1}s, {lost_offline} messages missing, {offline_discontinuities} pts discontinuities",
        users.iter().filter(|u| u.offline.is_some()).count(),
        t_off.elapsed().as_secs_f64()
    ));

    // 4. getDifference latency --------------------------------------------------------------
    let states = tokio::time::timeout(
        Duration::from_secs(60),
        stream::iter(users.iter().enumerate())
            .map(|(i, u)| async move {
                (
                    i,
                    unary(u.online.updates().get_state(req(GetStateRequest {}))).await,
                )
            })
            .buffer_unordered(SETUP_CONCURRENCY)
            .collect::<Vec<_>>(),
    )
    .await
    .map_err(|_| anyhow!("GetState timed out"))?;
    let mut state_mismatches = 0u64;
    let mut by_pts = Vec::new();
    for (i, s) in states {
        match s {
            Ok(s) => {
                if s.pts != reports[i].pts {
                    state_mismatches += 1;
                }
                by_pts.push((s.pts, i));
            }
            Err(code) => errors.add("get_state", &code),
        }
    }
    by_pts.sort_unstable_by(|a, b| b.cmp(a));
    by_pts.truncate(10);
    let mut diff_lat = Vec::with_capacity(DIFF_CALLS);
    let mut diff_updates = 0u64;
    if !by_pts.is_empty() {
        let t_diff = Instant::now();
        for k in 0..DIFF_CALLS {
            if t_diff.elapsed() > Duration::from_secs(60) {
                errors.add("difference", "PHASE_TIMEOUT");
                break;
            }
            let (pts, i) = by_pts[k % by_pts.len()];
            let t = Instant::now();
            match users[i].online.difference((pts - 100).max(0)).await {
                Ok(d) => {
                    diff_lat.push(t.elapsed().as_micros() as u64);
                    diff_updates += d.updates.len() as u64;
                }
                Err(code) => errors.add("difference", &code),
            }
        }
    }
    diff_lat.sort_unstable();
    let diff_avg_updates = if diff_lat.is_empty() {
        0.0
    } else {
        diff_updates as f64 / diff_lat.len() as f64
    };
    out.line(format!(
        "getDifference: {} calls over the {} busiest users (max pts {}), {:.0} updates each; p50 {} p99 {}",
        diff_lat.len(),
        by_pts.len(),
        by_pts.first().map_or(0, |p| p.0),
        diff_avg_updates,
        fmt_ms(pct_ms(&diff_lat, 50.0)),
        fmt_ms(pct_ms(&diff_lat, 99.0)),
    ));

    // 5. Drain ------------------------------------------------------------------------------
    let db = PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(RPC_DEADLINE)
        .connect(&args.database_url)
        .await
        .with_context(|| format!("cannot reach Postgres at {}", args.database_url))?;
    let drain = if args.drain_jobs > 0 {
        Some(
            tokio::time::timeout(
                DRAIN_CAP + Duration::from_secs(10),
                drain::drain_phase(args, &db, &users, &mut errors),
            )
            .await
            .map_err(|_| anyhow!("drain phase timed out"))??,
        )
    } else {
        None
    };
    if let Some(d) = &drain {
        out.line(format!(
            "drain: {} jobs enqueued in {:.1}s, backlog {} in {:.1}s → {:.0} jobs/s (pending before {}, failed rows {})",
            d.accepted,
            d.enqueue_s,
            if d.complete { "empty" } else { "NOT empty" },
            d.drain_s,
            d.jobs_per_s,
            d.pending_before,
            d.failed_after - d.failed_before,
        ));
    }
    db.close().await;

    // 6. Baseline ---------------------------------------------------------------------------
    let base = tokio::time::timeout(
        Duration::from_secs(args.duration + 60),
        baseline::baseline(args, &run),
    )
    .await
    .map_err(|_| anyhow!("baseline timed out"))??;
    let ratio = if base.tx_per_s > 0.0 {
        Some(round3(sends_per_s / base.tx_per_s))
    } else {
        None
    };
    out.line(format!(
        "baseline: {} naive transactions in {}s at concurrency {} → {:.1} tx/s ({} failed); ratio sends/baseline {}",
        base.committed,
        args.duration,
        args.senders,
        base.tx_per_s,
        base.failed,
        ratio.map_or("n/a".into(), |r| format!("{r:.3}")),
    ));

    // Summary -------------------------------------------------------------------------------
    let lost = lost_online + lost_offline;
    let send_p50 = pct_ms(&send_lat, 50.0);
    let send_p99 = pct_ms(&send_lat, 99.0);
    let push_p50 = pct_ms(&push_lat, 50.0);
    let push_p99 = pct_ms(&push_lat, 99.0);
    let diff_p99 = pct_ms(&diff_lat, 99.0);
    out.line("");
    out.line("summary");
    out.line(format!(
        "  sends/s {sends_per_s:.1}   send p50 {} p99 {}   push p50 {} p99 {}",
        fmt_ms(send_p50),
        fmt_ms(send_p99),
        fmt_ms(push_p50),
        fmt_ms(push_p99)
    ));
    out.line(format!(
        "  getDifference p99 {}   drain {} jobs/s   baseline {:.1} tx/s   ratio {}",
        fmt_ms(diff_p99),
        drain
            .as_ref()
            .map_or("n/a".into(), |d| format!("{:.0}", d.jobs_per_s)),
        base.tx_per_s,
        ratio.map_or("n/a".into(), |r| format!("{r:.3}"))
    ));
    out.line(format!(
        "  errors {}   duplicates {duplicates}   lost {lost}   late {late}",
        errors.total()
    ));
    if !errors.0.is_empty() {
        out.line(format!("  errors by code: {:?}", errors.0));
    }

    let mut put = |k: &str, v: Value| {
        json.insert(k.into(), v);
    };
    put("sends_per_s", json!(round3(sends_per_s)));
    put("send_p50_ms", num(send_p50));
    put("send_p99_ms", num(send_p99));
    put("push_p50_ms", num(push_p50));
    put("push_p99_ms", num(push_p99));
    put("difference_p99_ms", num(diff_p99));
    put(
        "drain_jobs_per_s",
        num(drain
            .as_ref()
            .filter(|d| d.complete)
            .map(|d| round3(d.jobs_per_s))),
    );
    put("baseline_tx_per_s", json!(round3(base.tx_per_s)));
    put("ratio", num(ratio));
    put("errors", json!(errors.total()));
    put("duplicates", json!(duplicates));
    put("lost", json!(lost));
    put("run_id", json!(run));
    put("users", json!(users.len()));
    put("senders", json!(args.senders));
    put("duration_s", json!(args.duration));
    put("warmup_s", json!(args.warmup));
    put("rate_target", num(args.rate));
    put("rate_skipped", json!(skipped));
    put("cpu_steal_pct", num(steal_pct.map(round3)));
    put("sent", json!(records.len()));
    put("persisted", json!(persisted.len()));
    put("measured_sends", json!(measured_ok));
    put("send_max_ms", num(pct_ms(&send_lat, 100.0)));
    put("slow_sends", json!(slow_sends));
    put("stall_episodes", json!(stall_episodes.len()));
    put(
        "worst_stalls",
        stalls::to_json(&stall_episodes, shared.wall0, &timeline),
    );
    put("push_samples", json!(push_lat.len()));
    put("push_max_ms", num(pct_ms(&push_lat, 100.0)));
    put("delivered_by_push", json!(via_stream));
    put("delivered_by_gap_fill", json!(via_gap_fill));
    put("late", json!(late));
    put("lost_online", json!(lost_online));
    put("lost_offline", json!(lost_offline));
    put("lost_samples", Value::Array(lost_samples));
    put("misrouted", json!(misrouted));
    put("received_unacked", json!(received_unacked));
    put("missing_outgoing_online", json!(missing_outgoing));
    put("missing_outgoing_offline", json!(offline_missing_outgoing));
    put("grace_wait_s", json!(round3(grace_wait)));
    put("gap_fills", json!(gap_fills));
    put("difference_needed", json!(diff_needed));
    put("stream_reconnects", json!(reconnects));
    put(
        "pts_discontinuities",
        json!(discontinuities + offline_discontinuities),
    );
    put("difference_too_long", json!(too_long));
    put("state_mismatches", json!(state_mismatches));
    put(
        "offline_devices",
        json!(users.iter().filter(|u| u.offline.is_some()).count()),
    );
    put("offline_updates", json!(offline_updates));
    put("difference_p50_ms", num(pct_ms(&diff_lat, 50.0)));
    put("difference_calls", json!(diff_lat.len()));
    put("difference_avg_updates", json!(round3(diff_avg_updates)));
    if let Some(d) = &drain {
        put("drain_jobs", json!(d.accepted));
        put("drain_complete", json!(d.complete));
        put("drain_s", json!(round3(d.drain_s)));
        put("drain_enqueue_s", json!(round3(d.enqueue_s)));
        put("drain_pending_before", json!(d.pending_before));
        put("drain_failed_rows", json!(d.failed_after - d.failed_before));
    }
    put("baseline_tx", json!(base.committed));
    put("baseline_failed", json!(base.failed));
    put("errors_by_code", json!(errors.0));
    Ok(Value::Object(json))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Arc<Shared> {
        Arc::new(Shared {
            run: "r".into(),
            t0: Instant::now(),
            wall0: chrono::Utc::now(),
            received: Mutex::new(HashSet::new()),
        })
    }

    fn state() -> anyhow::Result<DeviceState> {
        let channel = Endpoint::from_static("http://127.0.0.1:9").connect_lazy();
        Ok(DeviceState {
            dev: Dev {
                channel: InterceptedService::new(channel, SignWithKey::new(1, "00")?),
            },
            shared: shared(),
            pending: BTreeMap::new(),
            gap_since: None,
            r: DeviceReport::default(),
        })
    }

    fn msg(pts: i32, seq: u64, out: bool) -> PtsUpdate {
        PtsUpdate {
            pts,
            pts_count: 1,
            date: 0,
            update: Some(Update {
                kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                    message: Some(Message {
                        out,
                        text: bench_text("r", seq, 0),
                        ..Default::default()
                    }),
                })),
            }),
        }
    }

    #[tokio::test]
    async fn applies_only_contiguous_pts_and_buffers_gaps() -> anyhow::Result<()> {
        let mut st = state()?;
        st.offer(msg(1, 10, false), Via::Stream);
        st.offer(msg(3, 12, false), Via::Stream);
        assert_eq!(st.r.pts, 1);
        assert!(st.gap_since.is_some());
        st.offer(msg(2, 11, true), Via::Own);
        assert_eq!(st.r.pts, 3);
        assert!(st.gap_since.is_none() && st.pending.is_empty());
        assert_eq!(st.r.incoming.len(), 2);
        assert_eq!(st.r.outgoing.len(), 1);
        // A replay of an applied pts is no duplicate; the same text at a new pts is.
        st.offer(msg(3, 12, false), Via::Stream);
        assert_eq!(st.r.duplicates, 0);
        st.offer(msg(4, 12, false), Via::Stream);
        assert_eq!(st.r.duplicates, 1);
        assert_eq!(st.r.pts, 4);
        Ok(())
    }

    #[test]
    fn texts_and_percentiles() {
        assert_eq!(parse_text("ab", &bench_text("ab", 7, 99)), Some((7, 99)));
        assert_eq!(parse_text("ab", &bench_text("cd", 7, 99)), None);
        assert_eq!(parse_text("ab", "drain"), None);
        let samples: Vec<u64> = (1..=100).map(|v| v * 1000).collect();
        assert_eq!(pct_ms(&samples, 50.0), Some(50.0));
        assert_eq!(pct_ms(&samples, 99.0), Some(99.0));
        assert_eq!(pct_ms(&samples, 100.0), Some(100.0));
        assert_eq!(pct_ms(&[5000], 99.0), Some(5.0));
        assert_eq!(pct_ms(&[], 99.0), None);
    }
}
