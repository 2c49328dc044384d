//! CPU time the hypervisor gave to other guests while the send phase ran. On a shared virtual
//! machine a burst of it stalls every process at once and shows up as a latency tail that no
//! change of ours made or can remove, so each run reports it beside its figures, for the whole
//! phase and for each stall episode.

use std::time::Duration;

/// How often the send phase's timeline reads the machine's CPU times: the stall windows' width.
pub(super) const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The machine's CPU times read through the send phase, each with its time (µs since t0).
#[derive(Default)]
pub(super) struct Timeline(Vec<(u64, CpuTimes)>);

impl Timeline {
    /// Adds a reading, when /proc/stat can be read.
    pub(super) fn record(&mut self, at_us: u64) {
        if let Some(now) = CpuTimes::now() {
            self.0.push((at_us, now));
        }
    }

    /// The share of CPU time stolen from the last reading at or before `from_us` to the first
    /// at or after `to_us` (the first and last readings where the span runs past them).
    pub(super) fn steal_pct(&self, from_us: u64, to_us: u64) -> Option<f64> {
        let first = self.0.iter().rev().find(|(t, _)| *t <= from_us);
        let last = self.0.iter().find(|(t, _)| *t >= to_us);
        let (_, before) = first.or(self.0.first())?;
        let (_, after) = last.or(self.0.last())?;
        before.steal_pct(*after)
    }
}

/// The machine's cumulative CPU times (all CPUs), from the first line of /proc/stat.
#[derive(Clone, Copy)]
pub(super) struct CpuTimes {
    steal: u64,
    total: u64,
}

impl CpuTimes {
    /// `None` where /proc/stat is not there (not Linux) or not as expected.
    pub(super) fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        parse(stat.lines().next()?)
    }

    /// The share of CPU time stolen between `self` and `later`, in percent.
    pub(super) fn steal_pct(self, later: Self) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let steal = later.steal.checked_sub(self.steal)?;
        (total > 0).then(|| 100.0 * steal as f64 / total as f64)
    }
}

/// `cpu  user nice system idle iowait irq softirq steal …`; guest time is already in user.
fn parse(line: &str) -> Option<CpuTimes> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let times: Vec<u64> = fields
        .take(8)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    Some(CpuTimes {
        steal: *times.get(7)?,
        total: times.iter().sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_its_share_of_all_cpu_time() {
        let before = parse("cpu  100 0 50 800 10 0 20 20 0 0");
        let after = parse("cpu  200 0 100 1480 10 0 40 170 0 0");
        let pct = before.zip(after).and_then(|(b, a)| b.steal_pct(a));
        // 150 stolen of 1000 elapsed.
        assert_eq!(pct, Some(15.0));
        assert!(parse("intr 1 2 3").is_none());
    }

    #[test]
    fn a_span_takes_the_readings_around_it() {
        let reading = |line: &str| parse(line).unwrap_or(CpuTimes { steal: 0, total: 0 });
        let timeline = Timeline(vec![
            (0, reading("cpu  0 0 0 0 0 0 0 0")),
            (100, reading("cpu  20 0 0 0 0 0 0 0")),
            // 10 of 20 ticks stolen between 100 and 200.
            (200, reading("cpu  30 0 0 0 0 0 0 10")),
            (300, reading("cpu  50 0 0 0 0 0 0 10")),
        ]);
        assert_eq!(timeline.steal_pct(100, 200), Some(50.0));
        // 150..180 lies inside the readings at 100 and 200.
        assert_eq!(timeline.steal_pct(150, 180), Some(50.0));
        // The whole timeline: 10 of 60.
        assert_eq!(
            timeline.steal_pct(0, u64::MAX).map(|p| (p * 10.0).round()),
            Some(167.0)
        );
        assert_eq!(Timeline::default().steal_pct(0, 100), None);
    }
}
