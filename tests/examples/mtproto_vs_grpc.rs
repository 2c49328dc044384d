//! The MTProto door against the gRPC door under the same load, in one run: `--pairs` pairs of
//! users, each sender sending to its receiver in a closed loop for `--secs` seconds, every
//! receiver streaming (gRPC `Updates.Stream`, or an MTProto connection's pushes). Each message
//! carries its send time, so the receiver measures push latency (send start to arrival).
//! Phases alternate gRPC, MTProto for `--rounds` rounds; prints each phase's sends/s and
//! latencies, then a JSON line with the MTProto/gRPC ratios.
//!
//! ```sh
//! OXIGRAM_TEST_INFRA=local cargo run --release -p oxigram-tests --example mtproto_vs_grpc -- \
//!     [--pairs 8] [--secs 10] [--rounds 2]
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use oxigram_mtproto::ServerKey;
use oxigram_mtproto::client::{Client, Options};
use oxigram_proto::api::v1::stream_event;
use oxigram_proto::types::v1::update;
use oxigram_tests::mtproto::{send_text, sign_up};
use oxigram_tests::{Mode, System, TestClient, free_port};
use oxigram_tl::{Deserializable, enums, functions, types};
use tokio::time::Instant;

struct Args {
    pairs: usize,
    secs: u64,
    rounds: usize,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        pairs: 8,
        secs: 10,
        rounds: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value: u64 = it.next().context("a value after each flag")?.parse()?;
        match flag.as_str() {
            "--pairs" => a.pairs = value as usize,
            "--secs" => a.secs = value,
            "--rounds" => a.rounds = value as usize,
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

/// One phase's figures.
#[derive(Debug, Clone, Copy)]
struct Figures {
    sends_per_sec: f64,
    send_p50: f64,
    send_p99: f64,
    push_p50: f64,
    push_p99: f64,
    pushes: usize,
}

fn figures(mut sends: Vec<Duration>, mut pushes: Vec<Duration>, secs: u64) -> Figures {
    sends.sort();
    pushes.sort();
    Figures {
        sends_per_sec: sends.len() as f64 / secs as f64,
        send_p50: percentile(&sends, 0.5),
        send_p99: percentile(&sends, 0.99),
        push_p50: percentile(&pushes, 0.5),
        push_p99: percentile(&pushes, 0.99),
        pushes: pushes.len(),
    }
}

/// The send time a message's text carries (microseconds since `base`).
fn stamp(base: Instant) -> String {
    format!("t{}", base.elapsed().as_micros())
}

fn latency(base: Instant, text: &str) -> Option<Duration> {
    let sent = Duration::from_micros(text.strip_prefix('t')?.parse().ok()?);
    Some(base.elapsed().saturating_sub(sent))
}

async fn grpc_phase(
    senders: &[TestClient],
    receivers: &[TestClient],
    base: Instant,
    secs: u64,
    seq: &std::sync::atomic::AtomicI64,
) -> anyhow::Result<Figures> {
    let pushes = Arc::new(Mutex::new(Vec::new()));
    let mut readers = Vec::new();
    for r in receivers {
        let mut stream = r.stream(0).await?;
        let pushes = pushes.clone();
        readers.push(tokio::spawn(async move {
            while let Ok(Some(event)) = stream.message().await {
                if let Some(stream_event::Kind::Update(u)) = event.kind
                    && let Some(update::Kind::NewMessage(n)) = u.update.and_then(|u| u.kind)
                    && let Some(took) = n.message.and_then(|m| latency(base, &m.text))
                    && let Ok(mut pushes) = pushes.lock()
                {
                    pushes.push(took);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let until = Instant::now() + Duration::from_secs(secs);
    let loops = senders.iter().zip(receivers).map(|(from, to)| async move {
        let to = to.user_id()?;
        let mut took = Vec::new();
        while Instant::now() < until {
            let random_id = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let start = Instant::now();
            from.send(to, random_id, &stamp(base)).await?;
            took.push(start.elapsed());
        }
        anyhow::Ok(took)
    });
    let mut sends = Vec::new();
    for took in futures::future::join_all(loops).await {
        sends.extend(took?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for r in readers {
        r.abort();
    }
    let pushes = pushes.lock().map(|p| p.clone()).unwrap_or_default();
    Ok(figures(sends, pushes, secs))
}

/// The text of a pushed new message (updates or updateShortMessage).
fn pushed_text(push: &[u8]) -> Option<String> {
    match enums::Updates::deserialize(&mut oxigram_tl::Cursor::from_slice(push)).ok()? {
        enums::Updates::UpdateShortMessage(m) => Some(m.message),
        enums::Updates::Updates(u) => u.updates.into_iter().find_map(|u| match u {
            enums::Update::NewMessage(n) => match n.message {
                enums::Message::Message(m) => Some(m.message),
                _ => None,
            },
            _ => None,
        }),
        _ => None,
    }
}

async fn mtproto_phase(
    senders: Vec<(Client, i64)>,
    receivers: Vec<Client>,
    base: Instant,
    secs: u64,
    seq: Arc<std::sync::atomic::AtomicI64>,
) -> anyhow::Result<(Figures, Vec<(Client, i64)>, Vec<Client>)> {
    let pushes = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for mut r in receivers {
        let (pushes, stop) = (pushes.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            // Pushes start once the connection made a call signed in.
            r.invoke(&functions::updates::GetState {}).await?;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(push) =
                    tokio::time::timeout(Duration::from_millis(200), r.next_push()).await
                else {
                    continue;
                };
                if let Some(took) = pushed_text(&push?).and_then(|t| latency(base, &t))
                    && let Ok(mut pushes) = pushes.lock()
                {
                    pushes.push(took);
                }
            }
            anyhow::Ok(r)
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let until = Instant::now() + Duration::from_secs(secs);
    let loops: Vec<_> = senders
        .into_iter()
        .map(|(mut from, to)| {
            let seq = seq.clone();
            tokio::spawn(async move {
                let mut took = Vec::new();
                while Instant::now() < until {
                    let random_id = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let start = Instant::now();
                    from.invoke(&send_text(
                        enums::InputPeer::User(types::InputPeerUser {
                            user_id: to,
                            access_hash: 0,
                        }),
                        &stamp(base),
                        random_id,
                    ))
                    .await?;
                    took.push(start.elapsed());
                }
                anyhow::Ok((took, from, to))
            })
        })
        .collect();
    let mut sends = Vec::new();
    let mut senders = Vec::new();
    for done in loops {
        let (took, from, to) = done.await??;
        sends.extend(took);
        senders.push((from, to));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut receivers = Vec::new();
    for r in readers {
        receivers.push(r.await??);
    }
    let pushes = pushes.lock().map(|p| p.clone()).unwrap_or_default();
    Ok((figures(sends, pushes, secs), senders, receivers))
}

async fn mtproto_user(key: &ServerKey, port: u16, phone: &str) -> anyhow::Result<(Client, i64)> {
    let mut client = Client::connect(
        &format!("127.0.0.1:{port}"),
        key.public(),
        Options::default(),
    )
    .await?;
    let user = sign_up(&mut client, phone, "Bench").await?;
    Ok((client, user.id))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let (mut config, ground) = System::config().await?;
    config.db_pool_size = 16;
    config.telemetry.log_filter = "warn".into();
    // The harness's limits are out of the way of a closed loop, alike for both doors.
    let key = ServerKey::generate()?;
    let pem = ground.dir.join("mtproto_rsa.pem");
    std::fs::write(&pem, key.private_pem()?)?;
    let port = free_port()?;
    config.mtproto.listen = Some(([127, 0, 0, 1], port).into());
    config.mtproto.rsa_key_file = Some(pem.display().to_string());
    let system = System::start_with(config, ground, Mode::OneProcess).await?;

    // As many pairs on each door, each door's users its own (so that neither door's
    // deliveries load the other's phase).
    let mut grpc_senders = Vec::new();
    let mut grpc_receivers = Vec::new();
    for i in 0..a.pairs {
        let mut s = system.device().await?;
        s.sign_up(&format!("1930{i:06}"), "Sender").await?;
        let mut r = system.device().await?;
        r.sign_up(&format!("1931{i:06}"), "Receiver").await?;
        grpc_senders.push(s);
        grpc_receivers.push(r);
    }
    // The door opens with the gateway; the first connect may need a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut mt_senders = Vec::new();
    let mut mt_receivers = Vec::new();
    for i in 0..a.pairs {
        let (sender, _) = mtproto_user(&key, port, &format!("1932{i:06}")).await?;
        let (receiver, id) = mtproto_user(&key, port, &format!("1933{i:06}")).await?;
        mt_senders.push((sender, id));
        mt_receivers.push(receiver);
    }
    eprintln!("{} pairs on both doors", a.pairs);

    let base = Instant::now();
    let seq = Arc::new(std::sync::atomic::AtomicI64::new(1));
    // Warm-up of both.
    grpc_phase(&grpc_senders, &grpc_receivers, base, 2, &seq).await?;
    let (_, s, r) = mtproto_phase(mt_senders, mt_receivers, base, 2, seq.clone()).await?;
    (mt_senders, mt_receivers) = (s, r);

    let mut rows = Vec::new();
    for round in 1..=a.rounds {
        let grpc = grpc_phase(&grpc_senders, &grpc_receivers, base, a.secs, &seq).await?;
        let (mtproto, s, r) =
            mtproto_phase(mt_senders, mt_receivers, base, a.secs, seq.clone()).await?;
        (mt_senders, mt_receivers) = (s, r);
        for (door, f) in [("grpc", grpc), ("mtproto", mtproto)] {
            println!(
                "round {round} {door:8} {:8.1} sends/s  send p50 {:6.2} ms p99 {:6.2} ms  push p50 {:6.2} ms p99 {:6.2} ms  ({} pushes)",
                f.sends_per_sec, f.send_p50, f.send_p99, f.push_p50, f.push_p99, f.pushes
            );
        }
        rows.push((grpc, mtproto));
    }
    let sum = |pick: fn(&(Figures, Figures)) -> f64| rows.iter().map(pick).sum::<f64>();
    let ratio = sum(|r| r.1.sends_per_sec) / sum(|r| r.0.sends_per_sec);
    let push_ratio = sum(|r| r.0.push_p50) / sum(|r| r.1.push_p50).max(f64::MIN_POSITIVE);
    println!(
        "{}",
        serde_json::json!({
            "pairs": a.pairs,
            "secs": a.secs,
            "rounds": rows.iter().map(|(g, m)| serde_json::json!({
                "grpc": {"sends_per_sec": g.sends_per_sec, "send_p50_ms": g.send_p50,
                         "send_p99_ms": g.send_p99, "push_p50_ms": g.push_p50,
                         "push_p99_ms": g.push_p99},
                "mtproto": {"sends_per_sec": m.sends_per_sec, "send_p50_ms": m.send_p50,
                            "send_p99_ms": m.send_p99, "push_p50_ms": m.push_p50,
                            "push_p99_ms": m.push_p99},
            })).collect::<Vec<_>>(),
            "mtproto_over_grpc_sends": ratio,
            "grpc_over_mtproto_push_p50": push_ratio,
        })
    );
    Ok(())
}
