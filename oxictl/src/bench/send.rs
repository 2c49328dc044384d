//! Phase 2, the send phase: the senders (closed or open loop) over warm-up and measurement,
//! progress every 5 s, and the send figures (throughput, latency, stalls, CPU steal).

use super::*;

/// The send phase's records and figures.
pub(super) struct Sends {
    pub(super) records: Vec<SendRecord>,
    /// Open loop: sends skipped for lateness.
    pub(super) skipped: u64,
    /// Persisted sends (answered without error): seq → index in `records`.
    persisted: HashMap<u64, usize>,
    /// Start of the measurement, µs since t0.
    pub(super) warm_us: u64,
    pub(super) end: Instant,
    pub(super) timeline: steal::Timeline,
    pub(super) steal_pct: Option<f64>,
    /// Latencies of the measured persisted sends, sorted (µs).
    pub(super) latencies: Vec<u64>,
    pub(super) slow_sends: u64,
    pub(super) stall_episodes: Vec<stalls::Stall>,
    /// Persisted sends answered within the measurement.
    pub(super) measured_ok: usize,
    pub(super) sends_per_s: f64,
}

impl Sends {
    pub(super) fn persisted(&self) -> impl Iterator<Item = (u64, &SendRecord)> {
        self.persisted
            .iter()
            .map(|(&seq, &i)| (seq, &self.records[i]))
    }
    pub(super) fn persisted_record(&self, seq: u64) -> Option<&SendRecord> {
        self.persisted.get(&seq).map(|&i| &self.records[i])
    }
    pub(super) fn persisted_count(&self) -> usize {
        self.persisted.len()
    }
}

/// Runs the senders through warm-up and measurement, then computes the send figures.
pub(super) async fn send_phase(
    args: &BenchArgs,
    fleet: &mut Fleet,
    errors: &mut Errors,
    out: &Out,
) -> anyhow::Result<Sends> {
    let shared = fleet.shared.clone();
    let start = Instant::now();
    let warm_end = start + Duration::from_secs(args.warmup);
    let end = warm_end + Duration::from_secs(args.duration);
    let ctx = Arc::new(SendCtx {
        shared: shared.clone(),
        users: fleet.users.clone(),
        own: std::mem::take(&mut fleet.own),
        seq: AtomicU64::new(0),
        start,
        end,
        senders: args.senders,
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
        .map(|w| match args.rate {
            Some(rate) => tokio::spawn(open_loop(w, rate, ctx.clone())),
            None => tokio::spawn(closed_loop(ctx.clone())),
        })
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
    let mut timeline = timeline
        .lock()
        .map(|mut t| std::mem::take(&mut *t))
        .unwrap_or_default();
    timeline.record(shared.now_us());
    let window = (
        warm_end.duration_since(shared.t0).as_micros() as u64,
        end.duration_since(shared.t0).as_micros() as u64,
    );
    let sends = Sends::measure(args, records, skipped, window, send_end, timeline, errors);
    sends.print(&shared, out);
    Ok(sends)
}

impl Sends {
    /// The figures of the sends answered within the measurement window `(warm_us, end_us)`.
    fn measure(
        args: &BenchArgs,
        records: Vec<SendRecord>,
        skipped: u64,
        (warm_us, end_us): (u64, u64),
        end: Instant,
        timeline: steal::Timeline,
        errors: &mut Errors,
    ) -> Self {
        for r in &records {
            if let Err(code) = &r.outcome {
                errors.add("send", code);
            }
        }
        let persisted = records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.outcome.is_ok())
            .map(|(i, r)| (r.seq, i))
            .collect();
        let measured = || {
            records
                .iter()
                .filter(|r| r.outcome.is_ok() && r.start_us >= warm_us)
        };
        let mut latencies: Vec<u64> = measured()
            .map(|r| r.end_us.saturating_sub(r.start_us))
            .collect();
        latencies.sort_unstable();
        let (slow_sends, stall_episodes) =
            stalls::stalls(measured().map(|r| (r.start_us, r.end_us.saturating_sub(r.start_us))));
        let measured_ok = records
            .iter()
            .filter(|r| r.outcome.is_ok() && r.end_us >= warm_us && r.end_us <= end_us)
            .count();
        Self {
            steal_pct: timeline.steal_pct(0, u64::MAX),
            sends_per_s: measured_ok as f64 / args.duration as f64,
            records,
            skipped,
            persisted,
            warm_us,
            end,
            timeline,
            latencies,
            slow_sends,
            stall_episodes,
            measured_ok,
        }
    }

    fn print(&self, shared: &Shared, out: &Out) {
        out.line(format!(
            "send phase: {} sent, {} persisted, {} errors; {:.1} sends/s measured; latency p50 {} p99 {}",
            self.records.len(),
            self.persisted.len(),
            self.records.len() - self.persisted.len(),
            self.sends_per_s,
            fmt_ms(pct_ms(&self.latencies, 50.0)),
            fmt_ms(pct_ms(&self.latencies, 99.0)),
        ));
        out.line(format!(
            "  sends over {} ms: {}, in {} stall episodes; worst: {}",
            stalls::SLOW_SEND.as_millis(),
            self.slow_sends,
            self.stall_episodes.len(),
            stalls::to_json(&self.stall_episodes, shared.wall0, &self.timeline)
        ));
    }
}
