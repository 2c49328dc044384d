//! CPU time the hypervisor gave to other guests while the send phase ran. On a shared virtual
//! machine a burst of it stalls every process at once and shows up as a latency tail that no
//! change of ours made or can remove, so each run reports it beside its figures.

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
}
