//! `oxictl bench`: a load generator that drives a running system through the gateway's client
//! API over real gRPC, then measures update catch-up, getDifference latency, the dispatch
//! drain rate, and a raw-Postgres baseline of the same work.
//!
//! Phases, one module each: setup (users, online and offline devices) → send phase (closed or
//! open loop) and the online deliveries (push latency, duplicates and losses observed on the
//! recipients' online streams) → offline catch-up → getDifference latency → dispatch drain →
//! Postgres baseline → report. The last line of stdout is one JSON object with the results.
//! The devices are `oxigram_client` clients; the bench adds only what it measures.
//!
//! Everything is bounded: every unary call has a 5 s deadline, every phase a time cap, the
//! whole run a hard cap, and the number of tasks is the number of senders plus one per user.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fmt::Display,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, anyhow, bail};
use clap::Args;
use futures::{StreamExt, stream};
use oxigram_client::{Client, Deadline};
use oxigram_proto::{
    api::v1::SendMessageRequest,
    dispatch::v1::{EnqueueRequest, dispatch_client::DispatchClient},
    types::v1::{InputPeer, Message, Peer, PtsUpdate, PushJob, Update, UpdateNewMessage, update},
};
use serde_json::{Value, json};
use sqlx::{PgPool, postgres::PgPoolOptions};
use tokio::{
    sync::{oneshot, watch},
    task::JoinHandle,
    time::Instant,
};
use tonic::transport::{Channel, Endpoint};

mod baseline;
mod delivery;
mod device;
mod difference;
mod drain;
mod offline;
mod report;
mod send;
mod sender;
mod setup;
mod stalls;
mod stats;
mod steal;

use baseline::BaselineOutcome;
use delivery::Delivery;
use device::*;
use difference::DifferencePhase;
use drain::DrainOutcome;
use offline::Offline;
use send::Sends;
use sender::*;
use setup::Fleet;
use stats::*;

/// Deadline of every unary call.
const RPC_DEADLINE: Duration = Duration::from_secs(5);
const RPC: Deadline = Deadline::after(RPC_DEADLINE);
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

/// The phases in order; each prints its line as it ends.
async fn bench(gateway: &str, args: &BenchArgs, out: &Out) -> anyhow::Result<Value> {
    let run = format!("{:08x}", rand::random::<u32>());
    let phone_prefix = rand::random_range(0..1_000_000u32);
    let mut errors = Errors::default();
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
    let mut fleet = setup::setup(gateway, args, &run, phone_prefix, out).await?;
    let sends = send::send_phase(args, &mut fleet, &mut errors, out).await?;
    let mut delivery = delivery::deliveries(&mut fleet, &sends, &mut errors, out).await?;
    let offline = offline::catch_up(
        &fleet.users,
        &sends,
        &run,
        &mut delivery.lost_samples,
        &mut errors,
        out,
    )
    .await?;
    let difference =
        difference::difference_phase(&fleet.users, &delivery.reports, &mut errors, out).await?;
    let drain = drain::drain(args, &fleet.users, &mut errors, out).await?;
    let base = baseline::baseline_phase(args, &run, sends.sends_per_s, out).await?;
    let results = report::Results {
        args,
        run: &run,
        fleet: &fleet,
        sends: &sends,
        delivery: &delivery,
        offline: &offline,
        difference: &difference,
        drain: drain.as_ref(),
        base: &base,
        errors: &errors,
    };
    results.print(out);
    Ok(results.json())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared {
            run: "r".into(),
            t0: Instant::now(),
            wall0: chrono::Utc::now(),
            received: Mutex::new(HashSet::new()),
        }
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
                    random_id: 0,
                })),
            }),
        }
    }

    #[test]
    fn records_arrivals_and_duplicates() {
        let shared = shared();
        let mut r = DeviceReport::default();
        r.apply(&msg(1, 10, false), Via::Stream, &shared);
        r.apply(&msg(2, 11, true), Via::Own, &shared);
        r.apply(&msg(3, 12, false), Via::GapFill, &shared);
        assert_eq!(r.incoming.len(), 2);
        assert_eq!(r.outgoing.len(), 1);
        assert_eq!(r.incoming.get(&12).map(|i| i.2), Some(Via::GapFill));
        assert_eq!(shared.received.lock().map(|s| s.len()).ok(), Some(2));
        // A replay of an applied pts is no duplicate; the same text at a new pts is.
        r.apply(&msg(3, 12, false), Via::Stream, &shared);
        assert_eq!(r.duplicates, 0);
        r.apply(&msg(4, 12, false), Via::Stream, &shared);
        r.apply(&msg(5, 11, true), Via::Own, &shared);
        assert_eq!(r.duplicates, 2);
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
