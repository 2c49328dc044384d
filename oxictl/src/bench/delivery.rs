//! After the send phase: the grace period for the last pushes, then what the online devices
//! received — by push or gap fill, late, lost, duplicated or misrouted — and push latency.

use super::*;

/// The online devices' side of the send phase.
#[derive(Default)]
pub(super) struct Delivery {
    pub(super) reports: Vec<DeviceReport>,
    pub(super) grace_wait: f64,
    pub(super) duplicates: u64,
    pub(super) misrouted: u64,
    pub(super) received_unacked: u64,
    /// Push latencies of measured sends, sorted (µs).
    pub(super) push_lat: Vec<u64>,
    pub(super) via_stream: u64,
    pub(super) via_gap_fill: u64,
    pub(super) late: u64,
    pub(super) gap_fills: u64,
    pub(super) diff_needed: u64,
    pub(super) reconnects: u64,
    pub(super) discontinuities: u64,
    pub(super) too_long: u64,
    pub(super) lost_online: u64,
    pub(super) lost_samples: Vec<Value>,
    pub(super) missing_outgoing: u64,
}

/// Waits until every persisted message reached its recipient's online device (or the grace
/// period ends), stops the devices, and accounts for what they received.
pub(super) async fn deliveries(
    fleet: &mut Fleet,
    sends: &Sends,
    errors: &mut Errors,
    out: &Out,
) -> anyhow::Result<Delivery> {
    let shared = &fleet.shared;
    let grace_end = sends.end + GRACE;
    loop {
        let missing = match shared.received.lock() {
            Ok(set) => sends.persisted().filter(|(s, _)| !set.contains(s)).count(),
            Err(_) => bail!("receipt set poisoned"),
        };
        if missing == 0 || Instant::now() >= grace_end {
            out.line(format!(
                "grace: waited {:.1}s, {missing} persisted messages not yet on their recipient's online device",
                sends.end.elapsed().as_secs_f64()
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let grace_wait = sends.end.elapsed().as_secs_f64();
    let _ = fleet.stop.send(true);
    let mut reports = Vec::with_capacity(fleet.devices.len());
    for t in fleet.devices.drain(..) {
        let r = tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .map_err(|_| anyhow!("a device task did not stop"))??;
        reports.push(r);
    }
    let mut d = Delivery {
        grace_wait,
        ..Delivery::default()
    };
    d.count_received(&mut reports, sends, errors);
    d.reports = reports;
    d.check_losses(&fleet.users, sends, &shared.run, errors)
        .await;
    d.print(out);
    Ok(d)
}

impl Delivery {
    /// Sorts what each online device applied by how it came, against what was persisted.
    fn count_received(&mut self, reports: &mut [DeviceReport], sends: &Sends, errors: &mut Errors) {
        for rep in reports.iter_mut() {
            self.duplicates += rep.duplicates;
            self.gap_fills += rep.gap_fills;
            self.diff_needed += rep.difference_needed;
            self.reconnects += rep.reconnects;
            self.discontinuities += rep.discontinuities;
            self.too_long += rep.too_long;
            errors.merge(std::mem::take(&mut rep.errors));
            for (seq, &(_, latency, via)) in &rep.incoming {
                match sends.persisted_record(*seq) {
                    Some(r) if r.recipient != rep.user => self.misrouted += 1,
                    Some(r) => {
                        match via {
                            Via::Final => self.late += 1,
                            Via::GapFill => self.via_gap_fill += 1,
                            Via::Stream | Via::Own => self.via_stream += 1,
                        }
                        if via != Via::Final && r.start_us >= sends.warm_us {
                            self.push_lat.push(latency);
                        }
                    }
                    None => self.received_unacked += 1,
                }
            }
        }
        self.push_lat.sort_unstable();
    }

    /// Persisted but not on the online device: late if at least in the recipient's log, else
    /// lost. Outgoing messages should be in the sender's own state too.
    async fn check_losses(
        &mut self,
        users: &[BenchUser],
        sends: &Sends,
        run: &str,
        errors: &mut Errors,
    ) {
        let mut missing_by_user: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        for (seq, r) in sends.persisted() {
            if !self.reports[r.recipient].incoming.contains_key(&seq) {
                missing_by_user.entry(r.recipient).or_default().push(seq);
            }
        }
        for (user, seqs) in &missing_by_user {
            let in_log: HashSet<u64> = match full_difference(&users[*user].online, 0).await {
                Ok(all) => all
                    .iter()
                    .filter_map(new_message_of)
                    .filter(|m| !m.out)
                    .filter_map(|m| parse_text(run, &m.text).map(|(s, _)| s))
                    .collect(),
                Err(code) => {
                    errors.add("loss_check", &code);
                    HashSet::new()
                }
            };
            for seq in seqs {
                if in_log.contains(seq) {
                    self.late += 1;
                } else {
                    self.lost_online += 1;
                    if self.lost_samples.len() < 10 {
                        self.lost_samples
                            .push(json!({"seq": seq, "recipient_user_id": users[*user].id}));
                    }
                }
            }
        }
        for (seq, r) in sends.persisted() {
            if !self.reports[r.sender].outgoing.contains_key(&seq) {
                self.missing_outgoing += 1;
            }
        }
    }

    fn print(&self, out: &Out) {
        out.line(format!(
            "online devices: {} delivered in grace ({} by push, {} by gap fill), {} late (only by a final getDifference), {} lost, {} duplicates, {} misrouted; push latency p50 {} p99 {}; {} gap fills, {} difference-needed, {} reconnects",
            self.via_stream + self.via_gap_fill,
            self.via_stream,
            self.via_gap_fill,
            self.late,
            self.lost_online,
            self.duplicates,
            self.misrouted,
            fmt_ms(pct_ms(&self.push_lat, 50.0)),
            fmt_ms(pct_ms(&self.push_lat, 99.0)),
            self.gap_fills,
            self.diff_needed,
            self.reconnects,
        ));
    }
}
