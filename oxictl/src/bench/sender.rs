//! The senders of the send phase: a closed loop, or an open loop at a target rate.

use super::*;

pub(super) struct SendCtx {
    pub(super) shared: Arc<Shared>,
    pub(super) users: Arc<Vec<BenchUser>>,
    pub(super) own: Vec<mpsc::UnboundedSender<PtsUpdate>>,
    pub(super) seq: AtomicU64,
    pub(super) start: Instant,
    pub(super) end: Instant,
    pub(super) senders: usize,
    pub(super) rate: Option<f64>,
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

pub(super) async fn sender_task(worker: usize, ctx: Arc<SendCtx>) -> SenderReport {
    let mut out = SenderReport::default();
    let n = ctx.users.len();
    let period = ctx
        .rate
        .map(|r| Duration::from_secs_f64(ctx.senders as f64 / r));
    let mut k = 0u64;
    loop {
        let now = Instant::now();
        if now >= ctx.end {
            break;
        }
        let intended = match period {
            Some(p) => {
                let offset = k as f64 + worker as f64 / ctx.senders as f64;
                k += 1;
                let at = ctx.start + p.mul_f64(offset);
                if at >= ctx.end {
                    break;
                }
                if now.saturating_duration_since(at) > RPC_DEADLINE {
                    out.skipped += 1;
                    continue;
                }
                tokio::time::sleep_until(at).await;
                at
            }
            None => now,
        };
        let s = rand::random_range(0..n);
        let mut r = rand::random_range(0..n - 1);
        if r >= s {
            r += 1;
        }
        let seq = ctx.seq.fetch_add(1, Ordering::Relaxed);
        let sent_us = ctx.shared.now_us();
        let text = bench_text(&ctx.shared.run, seq, sent_us);
        let random_id = rand::random_range(1..i64::MAX);
        let outcome = unary(
            ctx.users[s]
                .online
                .messages()
                .send_message(req(SendMessageRequest {
                    peer_user_id: ctx.users[r].id,
                    random_id,
                    text,
                    ..Default::default()
                })),
        )
        .await;
        let end_us = ctx.shared.now_us();
        let outcome = match outcome {
            Ok(resp) => {
                if resp.pts > 0 {
                    let _ = ctx.own[s].send(PtsUpdate {
                        pts: resp.pts,
                        pts_count: resp.pts_count,
                        date: resp.message.as_ref().map_or(0, |m| m.date),
                        update: Some(Update {
                            kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                                message: resp.message,
                            })),
                        }),
                    });
                }
                Ok(())
            }
            Err(code) => {
                // Never spin on a failing system.
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err(code)
            }
        };
        out.records.push(SendRecord {
            seq,
            sender: s,
            recipient: r,
            start_us: intended.duration_since(ctx.shared.t0).as_micros() as u64,
            end_us,
            outcome,
        });
    }
    out
}
