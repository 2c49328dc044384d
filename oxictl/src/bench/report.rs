//! The report: the summary lines, and the JSON object that is the last line of stdout.

use super::*;

/// Every phase's outcome.
pub(super) struct Results<'a> {
    pub(super) args: &'a BenchArgs,
    pub(super) run: &'a str,
    pub(super) fleet: &'a Fleet,
    pub(super) sends: &'a Sends,
    pub(super) delivery: &'a Delivery,
    pub(super) offline: &'a Offline,
    pub(super) difference: &'a DifferencePhase,
    pub(super) drain: Option<&'a DrainOutcome>,
    pub(super) base: &'a BaselineOutcome,
    pub(super) errors: &'a Errors,
}

impl Results<'_> {
    fn duplicates(&self) -> u64 {
        self.delivery.duplicates + self.offline.duplicates
    }
    fn lost(&self) -> u64 {
        self.delivery.lost_online + self.offline.lost
    }
    fn ratio(&self) -> String {
        self.base.ratio.map_or("n/a".into(), |r| format!("{r:.3}"))
    }

    /// The summary lines.
    pub(super) fn print(&self, out: &Out) {
        let (s, d) = (self.sends, self.delivery);
        out.line("");
        out.line("summary");
        out.line(format!(
            "  sends/s {:.1}   send p50 {} p99 {}   push p50 {} p99 {}",
            s.sends_per_s,
            fmt_ms(pct_ms(&s.latencies, 50.0)),
            fmt_ms(pct_ms(&s.latencies, 99.0)),
            fmt_ms(pct_ms(&d.push_lat, 50.0)),
            fmt_ms(pct_ms(&d.push_lat, 99.0))
        ));
        out.line(format!(
            "  getDifference p99 {}   drain {} jobs/s   baseline {:.1} tx/s   ratio {}",
            fmt_ms(pct_ms(&self.difference.lat, 99.0)),
            self.drain
                .map_or("n/a".into(), |d| format!("{:.0}", d.jobs_per_s)),
            self.base.tx_per_s,
            self.ratio()
        ));
        out.line(format!(
            "  errors {}   duplicates {}   lost {}   late {}",
            self.errors.total(),
            self.duplicates(),
            self.lost(),
            d.late
        ));
        if !self.errors.0.is_empty() {
            out.line(format!("  errors by code: {:?}", self.errors.0));
        }
    }

    /// The JSON summary: the headline figures first, then the details behind them.
    pub(super) fn json(&self) -> Value {
        let (args, s, d, o) = (self.args, self.sends, self.delivery, self.offline);
        let diff = self.difference;
        let mut json = serde_json::Map::new();
        let mut put = |k: &str, v: Value| {
            json.insert(k.into(), v);
        };
        put("sends_per_s", json!(round3(s.sends_per_s)));
        put("send_p50_ms", num(pct_ms(&s.latencies, 50.0)));
        put("send_p99_ms", num(pct_ms(&s.latencies, 99.0)));
        put("push_p50_ms", num(pct_ms(&d.push_lat, 50.0)));
        put("push_p99_ms", num(pct_ms(&d.push_lat, 99.0)));
        put("difference_p99_ms", num(pct_ms(&diff.lat, 99.0)));
        put(
            "drain_jobs_per_s",
            num(self
                .drain
                .filter(|d| d.complete)
                .map(|d| round3(d.jobs_per_s))),
        );
        put("baseline_tx_per_s", json!(round3(self.base.tx_per_s)));
        put("ratio", num(self.base.ratio));
        put("errors", json!(self.errors.total()));
        put("duplicates", json!(self.duplicates()));
        put("lost", json!(self.lost()));
        put("run_id", json!(self.run));
        put("users", json!(self.fleet.users.len()));
        put("senders", json!(args.senders));
        put("duration_s", json!(args.duration));
        put("warmup_s", json!(args.warmup));
        put("rate_target", num(args.rate));
        put("rate_skipped", json!(s.skipped));
        put("cpu_steal_pct", num(s.steal_pct.map(round3)));
        put("sent", json!(s.records.len()));
        put("persisted", json!(s.persisted_count()));
        put("measured_sends", json!(s.measured_ok));
        put("send_max_ms", num(pct_ms(&s.latencies, 100.0)));
        put("slow_sends", json!(s.slow_sends));
        put("stall_episodes", json!(s.stall_episodes.len()));
        put(
            "worst_stalls",
            stalls::to_json(&s.stall_episodes, self.fleet.shared.wall0, &s.timeline),
        );
        put("push_samples", json!(d.push_lat.len()));
        put("push_max_ms", num(pct_ms(&d.push_lat, 100.0)));
        put("delivered_by_push", json!(d.via_stream));
        put("delivered_by_gap_fill", json!(d.via_gap_fill));
        put("late", json!(d.late));
        put("lost_online", json!(d.lost_online));
        put("lost_offline", json!(o.lost));
        put("lost_samples", Value::Array(d.lost_samples.clone()));
        put("misrouted", json!(d.misrouted));
        put("received_unacked", json!(d.received_unacked));
        put("missing_outgoing_online", json!(d.missing_outgoing));
        put("missing_outgoing_offline", json!(o.missing_outgoing));
        put("grace_wait_s", json!(round3(d.grace_wait)));
        put("gap_fills", json!(d.gap_fills));
        put("difference_needed", json!(d.diff_needed));
        put("stream_reconnects", json!(d.reconnects));
        put(
            "pts_discontinuities",
            json!(d.discontinuities + o.discontinuities),
        );
        put("difference_too_long", json!(d.too_long));
        put("state_mismatches", json!(diff.state_mismatches));
        put("offline_devices", json!(o.devices));
        put("offline_updates", json!(o.updates));
        put("difference_p50_ms", num(pct_ms(&diff.lat, 50.0)));
        put("difference_calls", json!(diff.lat.len()));
        put("difference_avg_updates", json!(round3(diff.avg_updates)));
        if let Some(d) = self.drain {
            put("drain_jobs", json!(d.accepted));
            put("drain_complete", json!(d.complete));
            put("drain_s", json!(round3(d.drain_s)));
            put("drain_enqueue_s", json!(round3(d.enqueue_s)));
            put("drain_pending_before", json!(d.pending_before));
            put("drain_failed_rows", json!(d.failed_after - d.failed_before));
        }
        put("baseline_tx", json!(self.base.committed));
        put("baseline_failed", json!(self.base.failed));
        put("errors_by_code", json!(self.errors.0));
        Value::Object(json)
    }
}
