//! Presence fan-out against sends, in one run: a user with N contacts (dialogs), every contact
//! streaming on its own device, while a few other pairs of contacts send in closed loops.
//! Phases alternate: sends alone ("quiet"), then sends while the hub user's presence churns
//! (UpdateStatus away/back every `--churn-ms`; each change the gateway lets through is pushed
//! to every contact's stream). Prints each phase's send latency and the status events the
//! contacts received, then a JSON line.
//!
//! ```sh
//! OXIGRAM_TEST_INFRA=local cargo run --release -p oxigram-tests --example presence_fanout -- \
//!     [--contacts 1000] [--senders 8] [--phase-secs 10] [--rounds 2] [--churn-ms 100]
//! ```

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use futures::{StreamExt, stream};
use oxigram_proto::api::v1::stream_event;
use oxigram_tests::{Mode, System, TestClient};
use tokio::time::Instant;

struct Args {
    contacts: usize,
    senders: usize,
    phase_secs: u64,
    rounds: usize,
    churn_ms: u64,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        contacts: 1000,
        senders: 8,
        phase_secs: 10,
        rounds: 2,
        churn_ms: 100,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value: u64 = it.next().context("a value after each flag")?.parse()?;
        match flag.as_str() {
            "--contacts" => a.contacts = value as usize,
            "--senders" => a.senders = value as usize,
            "--phase-secs" => a.phase_secs = value,
            "--rounds" => a.rounds = value as usize,
            "--churn-ms" => a.churn_ms = value,
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    anyhow::ensure!(a.contacts >= 2 * a.senders, "more contacts than senders");
    Ok(a)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

/// Closed-loop sends by contact 2i to contact 2i+1 until `stop`; every send's latency.
async fn send_phase(
    contacts: &[TestClient],
    ids: &[i64],
    senders: usize,
    secs: u64,
    seq: &AtomicU64,
) -> anyhow::Result<Vec<Duration>> {
    let until = Instant::now() + Duration::from_secs(secs);
    let loops = (0..senders).map(|i| {
        let (from, to) = (&contacts[2 * i], ids[2 * i + 1]);
        async move {
            let mut took = Vec::new();
            while Instant::now() < until {
                let random_id = seq.fetch_add(1, Ordering::Relaxed) as i64 + 1;
                let start = Instant::now();
                from.send(to, random_id, "quiet or not").await?;
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

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let (mut config, ground) = System::config().await?;
    config.db_pool_size = 16;
    config.telemetry.log_filter = "warn".into();
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    let gateway = system.gateway();

    // The hub and her contacts, each on its own device.
    let mut hub = system.device().await?;
    let hub_id = hub.sign_up("19000000", "Hub").await?.id;
    let contacts: Vec<TestClient> = stream::iter(0..a.contacts)
        .map(|i| {
            let gateway = gateway.clone();
            async move {
                let mut c = TestClient::new(&gateway).await?;
                c.sign_up(&format!("1901{i:06}"), "Contact").await?;
                anyhow::Ok(c)
            }
        })
        .buffered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let ids: Vec<i64> = contacts
        .iter()
        .map(|c| c.user_id())
        .collect::<Result<_, _>>()?;
    // A dialog with each: she wrote to every one of them.
    let hub = &hub;
    stream::iter(ids.iter().enumerate())
        .map(|(i, id)| async move { hub.send(*id, i as i64 + 1, "hello").await })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    eprintln!(
        "{} contacts signed up, each with a dialog with the hub",
        ids.len()
    );

    // Every contact streams; count the hub's status events they get.
    let statuses = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for c in &contacts {
        let mut s = c.stream(0).await?;
        let (statuses, stop) = (statuses.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match s.message().await {
                    Ok(Some(e)) => {
                        if let Some(stream_event::Kind::UserStatus(st)) = e.kind
                            && st.user_id == hub_id
                        {
                            statuses.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    _ => return,
                }
            }
        }));
    }
    eprintln!("{} streams open", readers.len());
    tokio::time::sleep(Duration::from_secs(4)).await;

    let seq = AtomicU64::new(1_000_000);
    // Warm-up.
    send_phase(&contacts, &ids, a.senders, 2, &seq).await?;
    let mut rows = Vec::new();
    for round in 0..a.rounds {
        for churn in [false, true] {
            let before = statuses.load(Ordering::Relaxed);
            let churning = Arc::new(AtomicBool::new(churn));
            let changes = Arc::new(AtomicU64::new(0));
            let churner = {
                let (churning, changes) = (churning.clone(), changes.clone());
                let hub_client = (**hub).clone();
                let every = Duration::from_millis(a.churn_ms);
                tokio::spawn(async move {
                    let mut away = true;
                    while churning.load(Ordering::Relaxed) {
                        if hub_client.update_status(away).await.is_ok() {
                            changes.fetch_add(1, Ordering::Relaxed);
                        }
                        away = !away;
                        tokio::time::sleep(every).await;
                    }
                })
            };
            let took = send_phase(&contacts, &ids, a.senders, a.phase_secs, &seq).await?;
            churning.store(false, Ordering::Relaxed);
            churner.await?;
            // Pushes in flight land within a moment.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let events = statuses.load(Ordering::Relaxed) - before;
            let row = (
                round + 1,
                if churn { "churn" } else { "quiet" },
                took.len() as f64 / a.phase_secs as f64,
                percentile(&took, 0.5),
                percentile(&took, 0.99),
                took.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
                changes.load(Ordering::Relaxed),
                events,
            );
            println!(
                "round {} {:5}: {:7.0} sends/s, p50 {:6.2} ms, p99 {:6.2} ms, max {:7.2} ms; \
                 {} status calls, {} status events on the contacts' streams",
                row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7
            );
            rows.push(row);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let json: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                r#"{{"round":{},"phase":"{}","sends_per_s":{:.0},"p50_ms":{:.2},"p99_ms":{:.2},"max_ms":{:.2},"status_calls":{},"status_events":{}}}"#,
                r.0, r.1, r.2, r.3, r.4, r.5, r.6, r.7
            )
        })
        .collect();
    println!(
        r#"{{"contacts":{},"senders":{},"phase_secs":{},"churn_ms":{},"phases":[{}]}}"#,
        a.contacts,
        a.senders,
        a.phase_secs,
        a.churn_ms,
        json.join(",")
    );
    for r in readers {
        r.abort();
    }
    Ok(())
}
