//! The senders of the send phase: a closed loop (each sender sends again as soon as it is
//! answered), or an open loop at a target rate (each sender keeps a schedule).

use oxigram_client::SentUpdates;

use super::*;

pub(super) struct SendCtx {
    pub(super) shared: Arc<Shared>,
    pub(super) users: Arc<Vec<BenchUser>>,
    /// Where each user's online device takes the answers to its sends.
    pub(super) own: Vec<SentUpdates>,
    pub(super) seq: AtomicU64,
    pub(super) start: Instant,
    pub(super) end: Instant,
    pub(super) senders: usize,
}

pub(super) struct SendRecord {
    pub(super) seq: u64,
    pub(super) sender: usize,
    pub(super) recipient: usize,
    /// Start of the request (µs since t0); the intended start in open loop.
    pub(super) start_us: u64,
    pub(super) end_us: u64,
    pub(super) outcome: Result<(), String>,
}

#[derive(Default)]
pub(super) struct SenderReport {
    pub(super) records: Vec<SendRecord>,
    /// Open loop: sends skipped because the sender was more than a deadline behind schedule.
    pub(super) skipped: u64,
}

/// Sends until the end of the phase, each send as soon as the previous one is answered.
pub(super) async fn closed_loop(ctx: Arc<SendCtx>) -> SenderReport {
    let mut out = SenderReport::default();
    while Instant::now() < ctx.end {
        out.records.push(send_one(&ctx, Instant::now()).await);
    }
    out
}

/// Sends on a schedule: worker `worker` of `ctx.senders` sends at its share of `rate`,
/// skipping the sends it is more than a deadline late for.
pub(super) async fn open_loop(worker: usize, rate: f64, ctx: Arc<SendCtx>) -> SenderReport {
    let mut out = SenderReport::default();
    let period = Duration::from_secs_f64(ctx.senders as f64 / rate);
    let mut k = 0u64;
    while Instant::now() < ctx.end {
        let offset = k as f64 + worker as f64 / ctx.senders as f64;
        k += 1;
        let at = ctx.start + period.mul_f64(offset);
        if at >= ctx.end {
            break;
        }
        if Instant::now().saturating_duration_since(at) > RPC_DEADLINE {
            out.skipped += 1;
            continue;
        }
        tokio::time::sleep_until(at).await;
        out.records.push(send_one(&ctx, at).await);
    }
    out
}

/// One send from a random user to another; its answer goes to the sender's online device.
async fn send_one(ctx: &SendCtx, intended: Instant) -> SendRecord {
    let n = ctx.users.len();
    let s = rand::random_range(0..n);
    let mut r = rand::random_range(0..n - 1);
    if r >= s {
        r += 1;
    }
    let seq = ctx.seq.fetch_add(1, Ordering::Relaxed);
    let sent_us = ctx.shared.now_us();
    let text = bench_text(&ctx.shared.run, seq, sent_us);
    let random_id = rand::random_range(1..i64::MAX);
    let outcome = ctx.users[s]
        .online
        .send_message(SendMessageRequest {
            peer: Some(InputPeer::user(ctx.users[r].id)),
            random_id,
            text,
            ..Default::default()
        })
        .await;
    let end_us = ctx.shared.now_us();
    let outcome = match outcome {
        Ok(response) => {
            ctx.own[s].answer(response);
            Ok(())
        }
        Err(e) => {
            // Never spin on a failing system.
            tokio::time::sleep(Duration::from_millis(20)).await;
            Err(e.code())
        }
    };
    SendRecord {
        seq,
        sender: s,
        recipient: r,
        start_us: intended.duration_since(ctx.shared.t0).as_micros() as u64,
        end_us,
        outcome,
    }
}
