//! Media throughput through the gateway against the disk it lands on, in one run: a file of
//! `--mib` MiB (200) of random bytes in the system's own folder, then (a) a plain copy of it
//! on the same disk (`std::fs::copy`, then fsync), (b) an upload through the gateway in parts
//! of 512 KiB, `--in-flight` at once, up to `CompleteUpload`'s answer, and (c) the recipient's
//! download of the message's file through the gateway in 1 MiB windows, `--in-flight` at
//! once, written to a file and fsynced. Each run uses new content (the server stores a
//! content once, so the same bytes again would skip the store). Prints each run's MiB/s,
//! CPU use (this process's, and the whole machine's busy share of its cores), then a JSON
//! line of the medians and the upload/copy and download/copy ratios; with `--processes`, also
//! svc-media's resident memory before and at its peak.
//!
//! ```sh
//! OXIGRAM_TEST_INFRA=local cargo run --release -p oxigram-tests --example media_throughput -- \
//!     [--runs 3] [--mib 200] [--in-flight 4] [--processes]
//! ```
//!
//! `--processes` runs each service as its own `oxigram serve` process (the release `oxigram`
//! binary must sit next to the example's folder: `cargo build --release -p oxigram`), so the
//! CPU of the gateway and of svc-media show apart.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use futures::{StreamExt, TryStreamExt, stream};
use oxigram::Target;
use oxigram_proto::api::v1::{
    CompleteUploadRequest, GetMessageFileRequest, InputMedia, InputSingleMedia,
    SaveFilePartRequest, SendMediaRequest, media_client::MediaClient,
    messages_client::MessagesClient,
};
use oxigram_proto::types::v1::{File, InputPeer, Message, message_media::Kind};
use oxigram_tests::{Mode, System, TestClient, rss_kib};
use rand::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

const MIB: u64 = 1024 * 1024;
const PART: usize = 512 * 1024;

struct Args {
    runs: usize,
    mib: u64,
    in_flight: usize,
    processes: bool,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        runs: 1,
        mib: 200,
        in_flight: 4,
        processes: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--processes" {
            a.processes = true;
            continue;
        }
        let value: u64 = it
            .next()
            .with_context(|| format!("{flag} takes a value"))?
            .parse()
            .with_context(|| format!("{flag} takes a number"))?;
        match flag.as_str() {
            "--runs" => a.runs = value as usize,
            "--mib" => a.mib = value,
            "--in-flight" => a.in_flight = value as usize,
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    anyhow::ensure!(a.runs >= 1, "--runs must be at least 1");
    anyhow::ensure!((1..=4000).contains(&a.mib), "--mib must be within 1..=4000");
    anyhow::ensure!(a.in_flight >= 1, "--in-flight must be at least 1");
    Ok(a)
}

/// CPU time of a process (user + system), from /proc.
fn cpu_of(pid: u32) -> Duration {
    let ticks = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The fields after the command's parenthesis; utime and stime are the 14th and
            // 15th of the line.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0);
    // The kernel's USER_HZ is 100 on every Linux this runs on.
    Duration::from_millis(ticks * 10)
}

/// The machine's busy and total jiffies across all cores, from /proc/stat.
fn machine() -> (u64, u64) {
    let line = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = line
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    // idle and iowait are not busy.
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// What one phase took, and the CPU it used.
#[derive(Clone, Copy, Default)]
struct Phase {
    secs: f64,
    mib_s: f64,
    /// CPU seconds of each process named in `Watch` during the phase, per wall second.
    cpu: [f64; 3],
    /// Busy share of all the machine's cores.
    busy: f64,
}

/// The processes whose CPU a phase reports: this one, and with `--processes` the gateway's
/// and svc-media's.
struct Watch {
    pids: [Option<u32>; 3],
}

impl Watch {
    fn measure<T>(&self, mib: u64, started: Instant, before: Before, done: T) -> (Phase, T) {
        let secs = started.elapsed().as_secs_f64();
        let (busy, total) = machine();
        let mut cpu = [0.0; 3];
        for (i, pid) in self.pids.iter().enumerate() {
            if let Some(pid) = pid {
                cpu[i] = (cpu_of(*pid) - before.cpu[i]).as_secs_f64() / secs;
            }
        }
        let phase = Phase {
            secs,
            mib_s: mib as f64 / secs,
            cpu,
            busy: (busy - before.busy) as f64 / (total - before.total).max(1) as f64,
        };
        (phase, done)
    }

    fn before(&self) -> Before {
        let (busy, total) = machine();
        let mut cpu = [Duration::ZERO; 3];
        for (i, pid) in self.pids.iter().enumerate() {
            if let Some(pid) = pid {
                cpu[i] = cpu_of(*pid);
            }
        }
        Before { cpu, busy, total }
    }
}

#[derive(Clone, Copy)]
struct Before {
    cpu: [Duration; 3],
    busy: u64,
    total: u64,
}

/// Writes `mib` MiB of random bytes from `seed` to `path`, fsynced; its SHA-256.
fn make_file(path: &Path, mib: u64, seed: u64) -> anyhow::Result<String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; MIB as usize];
    for _ in 0..mib {
        rng.fill_bytes(&mut buf);
        hasher.update(&buf);
        out.write_all(&buf)?;
    }
    out.into_inner()?.sync_all()?;
    Ok(hex::encode(hasher.finalize()))
}

fn sha256_of(path: &Path) -> anyhow::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// The next part of `file` (empty at its end), read into a buffer that is not zeroed first.
async fn read_part(file: &mut tokio::fs::File) -> std::io::Result<Bytes> {
    let mut buf = BytesMut::with_capacity(PART);
    while buf.len() < PART {
        if file.read_buf(&mut buf).await? == 0 {
            break;
        }
    }
    Ok(buf.freeze())
}

/// Uploads the file in parts of 512 KiB, `in_flight` at once, and completes it.
async fn upload(
    device: &TestClient,
    path: &Path,
    upload_id: i64,
    in_flight: usize,
) -> anyhow::Result<File> {
    let file = tokio::fs::File::open(path).await?;
    let reader = stream::try_unfold((file, 0i32), |(mut file, part)| async move {
        let buf = read_part(&mut file).await?;
        if buf.is_empty() {
            return Ok::<_, anyhow::Error>(None);
        }
        Ok(Some(((part, buf), (file, part + 1))))
    });
    let channel = device.channel();
    let saved = reader
        .map_ok(|(part, bytes)| {
            let mut media = MediaClient::new(channel.clone());
            async move {
                media
                    .save_file_part(SaveFilePartRequest {
                        file_id: upload_id,
                        part,
                        bytes,
                    })
                    .await
                    .with_context(|| format!("part {part}"))
            }
        })
        .try_buffer_unordered(in_flight);
    let mut saved = std::pin::pin!(saved);
    let mut parts = 0;
    while saved.try_next().await?.is_some() {
        parts += 1;
    }
    Ok(MediaClient::new(channel.clone())
        .complete_upload(CompleteUploadRequest {
            file_id: upload_id,
            parts,
            name: "bench.bin".into(),
        })
        .await?
        .into_inner())
}

/// Downloads message `m`'s file in 1 MiB windows, `in_flight` at once, written in order to
/// `to` (fsynced) by a thread of its own: writing a window does not hold up the next fetches.
async fn download(
    device: &TestClient,
    m: &Message,
    to: &Path,
    in_flight: usize,
) -> anyhow::Result<u64> {
    let media = m.media.clone().context("the message carries no file")?;
    let size = media.size as u64;
    let channel = device.channel();
    let peer = m.peer_id.and_then(|p| p.user_id()).map(InputPeer::user);
    let windows = stream::iter((0..size.div_ceil(MIB)).map(|i| i * MIB)).map(|offset| {
        let mut client = MediaClient::new(channel.clone());
        let request = GetMessageFileRequest {
            peer,
            msg_id: m.id,
            file_reference: media.file_reference.clone(),
            thumb_size: String::new(),
            offset: offset as i64,
            limit: MIB as i32,
        };
        async move {
            let chunk = client.get_message_file(request).await?.into_inner();
            anyhow::ensure!(
                chunk.bytes.len() as u64 == MIB.min(size - offset),
                "a short window at {offset}"
            );
            Ok(chunk.bytes)
        }
    });
    let (to_writer, mut written_by_writer) = tokio::sync::mpsc::channel::<Bytes>(in_flight);
    let mut out = std::fs::File::create(to)?;
    let writer = tokio::task::spawn_blocking(move || {
        let mut written = 0u64;
        while let Some(bytes) = written_by_writer.blocking_recv() {
            out.write_all(&bytes)?;
            written += bytes.len() as u64;
        }
        out.sync_all()?;
        Ok::<_, std::io::Error>(written)
    });
    let mut chunks = std::pin::pin!(windows.buffered(in_flight));
    while let Some(bytes) = chunks.try_next().await? {
        // A writer that stopped tells why below.
        if to_writer.send(bytes).await.is_err() {
            break;
        }
    }
    drop(to_writer);
    Ok(writer.await??)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn show(name: &str, p: &Phase, processes: bool) -> String {
    let cpu = if processes {
        format!(
            "cpu/wall: example {:.2}, gateway {:.2}, media {:.2}",
            p.cpu[0], p.cpu[1], p.cpu[2]
        )
    } else {
        format!("cpu/wall of the one process {:.2}", p.cpu[0])
    };
    format!(
        "{name:<10} {:>7.2} s {:>8.1} MiB/s   {cpu}; machine busy {:.0}%",
        p.secs,
        p.mib_s,
        p.busy * 100.0
    )
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let (mut config, ground) = System::config().await?;
    // Assembling a big upload reads and hashes every byte once: more than the usual wait.
    config.rpc_timeout_ms = 300_000;
    let mode = if a.processes {
        Mode::Processes
    } else {
        Mode::OneProcess
    };
    let system = System::start_with(config, ground, mode).await?;
    system.wait_serving(Target::Media).await?;
    let watch = Watch {
        pids: [
            Some(std::process::id()),
            a.processes.then(|| system.pid(Target::Gateway)).flatten(),
            a.processes.then(|| system.pid(Target::Media)).flatten(),
        ],
    };
    let [alice, bob] = system
        .users([("15559001", "Alice"), ("15559002", "Bob")])
        .await?;
    let (alice_id, bob_id) = (alice.user_id()?, bob.user_id()?);
    let dir = system.dir.join("bench");
    std::fs::create_dir_all(&dir)?;
    eprintln!(
        "{} MiB, {} in flight, {} run(s), {}, files in {}",
        a.mib,
        a.in_flight,
        a.runs,
        if a.processes {
            "one process per service"
        } else {
            "all services in this process"
        },
        dir.display()
    );

    // svc-media's resident memory (its own process): a file goes through it part by part, so
    // its peak must not grow with the file.
    let media_pid = watch.pids[2];
    let media_rss_before = media_pid.map(rss_kib).transpose()?.map(|(now, _)| now);

    let (mut copies, mut nosync, mut ups, mut downs) = (vec![], vec![], vec![], vec![]);
    for run in 1..=a.runs {
        let source = dir.join("source.bin");
        let sha256 = make_file(&source, a.mib, run as u64)?;

        // (a) The disk: a plain copy, fsynced, then the same without the fsync.
        let copy = dir.join("copy.bin");
        let before = watch.before();
        let started = Instant::now();
        std::fs::copy(&source, &copy)?;
        std::fs::File::open(&copy)?.sync_all()?;
        let (copied, ()) = watch.measure(a.mib, started, before, ());
        std::fs::remove_file(&copy)?;
        let before = watch.before();
        let started = Instant::now();
        std::fs::copy(&source, &copy)?;
        let (unsynced, ()) = watch.measure(a.mib, started, before, ());
        std::fs::File::open(&copy)?.sync_all()?;
        std::fs::remove_file(&copy)?;

        // (b) Up through the gateway.
        let before = watch.before();
        let started = Instant::now();
        let file = upload(&alice, &source, run as i64, a.in_flight).await?;
        let (up, file) = watch.measure(a.mib, started, before, file);
        anyhow::ensure!(file.sha256 == sha256, "the upload's hash differs");

        // (c) Down through the gateway, as the recipient of a message carrying it.
        let sent = MessagesClient::new(alice.channel())
            .send_media(SendMediaRequest {
                peer: Some(InputPeer::user(bob_id)),
                multi_media: vec![InputSingleMedia {
                    media: Some(InputMedia {
                        kind: Kind::Document as i32,
                        file_id: file.id,
                        mime_type: "application/octet-stream".into(),
                        ..InputMedia::default()
                    }),
                    random_id: run as i64,
                    caption: String::new(),
                    entities: vec![],
                }],
                ..SendMediaRequest::default()
            })
            .await?
            .into_inner();
        anyhow::ensure!(sent.sent.len() == 1, "the send made no message");
        let inbox = bob.history(alice_id).await?;
        let m = inbox.first().context("Bob got nothing")?;
        let target = dir.join("downloaded.bin");
        let before = watch.before();
        let started = Instant::now();
        let got = download(&bob, m, &target, a.in_flight).await?;
        let (down, got) = watch.measure(a.mib, started, before, got);
        anyhow::ensure!(got == a.mib * MIB, "downloaded {got} bytes");
        anyhow::ensure!(sha256_of(&target)? == sha256, "the download's hash differs");
        std::fs::remove_file(&target)?;
        std::fs::remove_file(&source)?;

        eprintln!("run {run}:");
        eprintln!("  {}", show("copy+fsync", &copied, a.processes));
        eprintln!("  {}", show("copy", &unsynced, a.processes));
        eprintln!("  {}", show("upload", &up, a.processes));
        eprintln!("  {}", show("download", &down, a.processes));
        copies.push(copied.mib_s);
        nosync.push(unsynced.mib_s);
        ups.push(up.mib_s);
        downs.push(down.mib_s);
    }
    let (copy, up, down) = (median(copies), median(ups), median(downs));
    let media_rss = media_pid.map(rss_kib).transpose()?;
    if let (Some(before), Some((after, peak))) = (media_rss_before, media_rss) {
        eprintln!(
            "media RSS: {} MiB before, {} MiB after, peak {} MiB",
            before / 1024,
            after / 1024,
            peak / 1024
        );
    }
    println!(
        "{}",
        serde_json::json!({
            "mib": a.mib,
            "runs": a.runs,
            "in_flight": a.in_flight,
            "mode": if a.processes { "processes" } else { "one_process" },
            "copy_fsync_mib_s": (copy * 10.0).round() / 10.0,
            "copy_no_fsync_mib_s": (median(nosync) * 10.0).round() / 10.0,
            "upload_mib_s": (up * 10.0).round() / 10.0,
            "download_mib_s": (down * 10.0).round() / 10.0,
            "upload_vs_copy": (up / copy * 100.0).round() / 100.0,
            "download_vs_copy": (down / copy * 100.0).round() / 100.0,
            "media_rss_before_kib": media_rss_before,
            "media_rss_peak_kib": media_rss.map(|(_, peak)| peak),
        })
    );
    // The blob store holds every run's upload: hundreds of MiB to leave behind.
    let folder = system.dir.clone();
    drop(system);
    std::fs::remove_dir_all(&folder).with_context(|| format!("removing {}", folder.display()))?;
    Ok(())
}
