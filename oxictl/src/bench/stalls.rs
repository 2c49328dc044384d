//! Where the send tail comes from: the measured sends slower than a threshold, grouped into
//! stall episodes (runs of adjacent 100 ms windows in which some send started that was slow),
//! with their wall-clock time so they can be laid next to Postgres' log, vmstat or a profile.

use chrono::{DateTime, SecondsFormat, Utc};

use super::*;

/// A send slower than this counts as slow: the latency target at 70 % of the peak.
pub(super) const SLOW_SEND: Duration = Duration::from_millis(50);
/// Width of the windows that are merged into episodes: the period of the steal timeline, so
/// each window has its own reading.
const WINDOW_US: u64 = steal::SAMPLE_EVERY.as_micros() as u64;
/// Episodes reported, worst first.
const REPORTED: usize = 5;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Stall {
    /// Start of the first slow window, µs since t0.
    pub(super) from_us: u64,
    /// End of the last slow window, µs since t0.
    pub(super) to_us: u64,
    pub(super) slow_sends: u64,
    pub(super) max_us: u64,
}

/// The slow sends among `(start_us, latency_us)` samples, and their episodes, worst first.
pub(super) fn stalls(samples: impl IntoIterator<Item = (u64, u64)>) -> (u64, Vec<Stall>) {
    let threshold = SLOW_SEND.as_micros() as u64;
    // Window index → (slow sends, worst latency).
    let mut windows: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for (start, lat) in samples {
        if lat > threshold {
            let w = windows.entry(start / WINDOW_US).or_default();
            w.0 += 1;
            w.1 = w.1.max(lat);
        }
    }
    let slow = windows.values().map(|w| w.0).sum();
    let mut episodes: Vec<Stall> = Vec::new();
    for (idx, (count, max)) in windows {
        match episodes.last_mut() {
            Some(e) if e.to_us == idx * WINDOW_US => {
                e.to_us += WINDOW_US;
                e.slow_sends += count;
                e.max_us = e.max_us.max(max);
            }
            _ => episodes.push(Stall {
                from_us: idx * WINDOW_US,
                to_us: (idx + 1) * WINDOW_US,
                slow_sends: count,
                max_us: max,
            }),
        }
    }
    episodes.sort_by(|a, b| b.max_us.cmp(&a.max_us).then(a.from_us.cmp(&b.from_us)));
    (slow, episodes)
}

/// The reported episodes as JSON, with UTC wall-clock times (`wall0` is the wall clock at t0)
/// and the CPU time stolen from the machine while their slow sends ran.
pub(super) fn to_json(episodes: &[Stall], wall0: DateTime<Utc>, cpu: &steal::Timeline) -> Value {
    let at = |us: u64| {
        (wall0 + chrono::Duration::microseconds(us as i64))
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    };
    Value::Array(
        episodes
            .iter()
            .take(REPORTED)
            .map(|e| {
                json!({
                    "from": at(e.from_us),
                    "ms": (e.to_us - e.from_us) / 1000,
                    "slow_sends": e.slow_sends,
                    "max_ms": round3(e.max_us as f64 / 1000.0),
                    "steal_pct": num(cpu.steal_pct(e.from_us, e.to_us + e.max_us).map(round3)),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_slow_windows_form_one_episode_and_the_worst_comes_first() {
        let samples = [
            (10_000, 5_000),   // fast: ignored
            (120_000, 60_000), // window 1
            (250_000, 80_000), // window 2: same episode
            (260_000, 70_000),
            (900_000, 200_000), // window 9: a second, worse episode
            (950_000, 40_000),  // fast
        ];
        let (slow, episodes) = stalls(samples);
        assert_eq!(slow, 4);
        assert_eq!(
            episodes,
            vec![
                Stall {
                    from_us: 900_000,
                    to_us: 1_000_000,
                    slow_sends: 1,
                    max_us: 200_000
                },
                Stall {
                    from_us: 100_000,
                    to_us: 300_000,
                    slow_sends: 3,
                    max_us: 80_000
                },
            ]
        );
        let wall0 = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default();
        let json = to_json(&episodes, wall0, &steal::Timeline::default());
        assert_eq!(json[0]["from"], "2026-11-30T10:00:00.900Z");
        assert_eq!(json[1]["ms"], 200);
        assert_eq!(json[1]["steal_pct"], Value::Null, "no readings, no figure");
    }
}
