//! Phase 4: GetState of every user (it must equal what the online device applied), then
//! getDifference latency over the 100 latest events of the busiest users.

use super::*;

#[derive(Default)]
pub(super) struct DifferencePhase {
    /// Latencies, sorted (µs).
    pub(super) lat: Vec<u64>,
    pub(super) avg_updates: f64,
    pub(super) state_mismatches: u64,
}

pub(super) async fn difference_phase(
    users: &[BenchUser],
    reports: &[DeviceReport],
    errors: &mut Errors,
    out: &Out,
) -> anyhow::Result<DifferencePhase> {
    let mut phase = DifferencePhase::default();
    let states = tokio::time::timeout(
        Duration::from_secs(60),
        stream::iter(users.iter().enumerate())
            .map(|(i, u)| async move { (i, u.online.get_state().await) })
            .buffer_unordered(SETUP_CONCURRENCY)
            .collect::<Vec<_>>(),
    )
    .await
    .map_err(|_| anyhow!("GetState timed out"))?;
    let mut by_pts = Vec::new();
    for (i, s) in states {
        match s {
            Ok(s) => {
                if s.pts != reports[i].pts {
                    phase.state_mismatches += 1;
                }
                by_pts.push((s.pts, i));
            }
            Err(e) => errors.add("get_state", &e.code()),
        }
    }
    by_pts.sort_unstable_by(|a, b| b.cmp(a));
    by_pts.truncate(10);
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
            match users[i]
                .online
                .get_difference((pts - 100).max(0), DIFF_LIMIT)
                .await
            {
                Ok(d) => {
                    phase.lat.push(t.elapsed().as_micros() as u64);
                    diff_updates += d.updates.len() as u64;
                }
                Err(e) => errors.add("difference", &e.code()),
            }
        }
    }
    phase.lat.sort_unstable();
    if !phase.lat.is_empty() {
        phase.avg_updates = diff_updates as f64 / phase.lat.len() as f64;
    }
    out.line(format!(
        "getDifference: {} calls over the {} busiest users (max pts {}), {:.0} updates each; p50 {} p99 {}",
        phase.lat.len(),
        by_pts.len(),
        by_pts.first().map_or(0, |p| p.0),
        phase.avg_updates,
        fmt_ms(pct_ms(&phase.lat, 50.0)),
        fmt_ms(pct_ms(&phase.lat, 99.0)),
    ));
    Ok(phase)
}
