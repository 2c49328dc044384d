//! The generic cell rate algorithm on one instance: a key's state is its theoretical arrival
//! time (TAT); a request of `n` units is allowed when `TAT + n·interval - period <= now`,
//! which lets `limit` units through at once and then one per `period / limit`. It is the same
//! rule as the Redis script's, so a limit means the same wherever it is decided.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

/// Keys one table keeps before it forgets those whose bucket is full again.
const MAX_KEYS: usize = 100_000;

/// GCRA state per key, all on one rule's limit.
#[derive(Debug, Default)]
pub struct Table {
    tat: HashMap<String, Instant>,
}

/// What a check found: allowed, or the wait until it would be.
pub type Verdict = Result<(), Duration>;

impl Table {
    /// Whether `n` units of `key` fit `limit` per `period` at `now`, without spending them.
    pub fn peek(&self, key: &str, n: u32, limit: u32, period: Duration, now: Instant) -> Verdict {
        let tat = self.tat.get(key).copied().unwrap_or(now).max(now);
        verdict(tat, n, limit, period, now).map(|_| ())
    }

    /// Spends `n` units of `key` when they fit.
    pub fn spend(
        &mut self,
        key: &str,
        n: u32,
        limit: u32,
        period: Duration,
        now: Instant,
    ) -> Verdict {
        let tat = self.tat.get(key).copied().unwrap_or(now).max(now);
        let new_tat = verdict(tat, n, limit, period, now)?;
        if self.tat.len() >= MAX_KEYS {
            self.tat.retain(|_, tat| *tat > now);
        }
        self.tat.insert(key.to_owned(), new_tat);
        Ok(())
    }
}

/// The TAT after spending `n` units at `now`, or the wait until they fit.
fn verdict(
    tat: Instant,
    n: u32,
    limit: u32,
    period: Duration,
    now: Instant,
) -> Result<Instant, Duration> {
    let interval = period / limit.max(1);
    let new_tat = tat + interval * n;
    let allowed_at = new_tat.checked_sub(period).unwrap_or(now);
    if allowed_at > now {
        Err(allowed_at - now)
    } else {
        Ok(new_tat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_burst_of_the_limit_then_one_per_interval() {
        let mut table = Table::default();
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(table.spend("u", 1, 3, MINUTE, start), Ok(()));
        }
        let wait = table.spend("u", 1, 3, MINUTE, start).err();
        assert_eq!(wait, Some(Duration::from_secs(20)));
        // Another key has its own bucket.
        assert_eq!(table.spend("v", 1, 3, MINUTE, start), Ok(()));
        // One interval later, one more fits, and only one.
        let later = start + Duration::from_secs(20);
        assert_eq!(table.spend("u", 1, 3, MINUTE, later), Ok(()));
        assert!(table.spend("u", 1, 3, MINUTE, later).is_err());
    }

    #[test]
    fn a_refused_request_spends_nothing_and_peeking_spends_nothing() {
        let mut table = Table::default();
        let now = Instant::now();
        assert!(
            table.spend("u", 4, 3, MINUTE, now).is_err(),
            "more than the limit at once"
        );
        assert_eq!(table.peek("u", 3, 3, MINUTE, now), Ok(()));
        assert_eq!(table.peek("u", 3, 3, MINUTE, now), Ok(()));
        assert_eq!(table.spend("u", 3, 3, MINUTE, now), Ok(()));
        assert!(table.peek("u", 1, 3, MINUTE, now).is_err());
    }
}
