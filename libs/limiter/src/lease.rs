//! What this instance may decide about a key without asking Redis: units it took from the
//! shared bucket ahead of need (a lease), and a refusal the shared bucket gave until a known
//! time. Both agree with the shared limit: leased units were already spent in Redis, and
//! nothing can make room in a bucket before the time Redis named. A lease lasts only as long
//! as the shared bucket takes to earn its units back, so units leased and left unused cannot
//! join a later burst.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

/// Keys kept before the table forgets those whose lease or refusal is over.
const MAX_KEYS: usize = 100_000;

#[derive(Debug, Default)]
pub struct Leases {
    keys: HashMap<String, Held>,
}

/// A rule's limit and period: what a lease or a refusal was given under.
pub type Terms = (u32, Duration);

#[derive(Debug, Clone, Copy)]
struct Held {
    terms: Terms,
    until: Instant,
    what: What,
}

#[derive(Debug, Clone, Copy)]
enum What {
    /// `left` units spent in Redis and not yet granted here.
    Units { left: u32 },
    /// Redis refused `units`: as many units or more are refused until then.
    Refused { units: u32 },
}

impl Leases {
    /// The verdict on `units` of `key` when this instance can give it: granted from a lease
    /// (the units taken from it) or refused by a refusal still standing; `None` when Redis
    /// must decide.
    pub fn take(
        &mut self,
        key: &str,
        units: u32,
        terms: Terms,
        now: Instant,
    ) -> Option<Result<(), Duration>> {
        let held = self.keys.get_mut(key)?;
        if held.until <= now || held.terms != terms {
            self.keys.remove(key);
            return None;
        }
        match &mut held.what {
            What::Units { left } if *left >= units => {
                *left -= units;
                if *left == 0 {
                    self.keys.remove(key);
                }
                Some(Ok(()))
            }
            What::Refused { units: refused } if units >= *refused => Some(Err(held.until - now)),
            _ => None,
        }
    }

    /// `left` units of `key` spent in Redis under `terms` for this instance to grant, for as
    /// long as the shared bucket takes to earn them back (`earned_in`). Checks of one key that
    /// found no lease at once each bring one: their units add up rather than replace each
    /// other, which would lose units already spent in Redis.
    pub fn lease(&mut self, key: &str, left: u32, terms: Terms, earned_in: Duration, now: Instant) {
        if left == 0 {
            return;
        }
        let (left, until) = match self.keys.get(key) {
            Some(Held {
                terms: held_terms,
                until,
                what: What::Units { left: held },
            }) if *held_terms == terms && *until > now => (held + left, *until + earned_in),
            _ => (left, now + earned_in),
        };
        let what = What::Units { left };
        self.keep(key, Held { terms, until, what }, now);
    }

    /// Redis refused `units` of `key` under `terms` until `until`.
    pub fn refuse(&mut self, key: &str, units: u32, terms: Terms, until: Instant, now: Instant) {
        let what = What::Refused { units };
        self.keep(key, Held { terms, until, what }, now);
    }

    fn keep(&mut self, key: &str, held: Held, now: Instant) {
        if self.keys.len() >= MAX_KEYS {
            self.keys.retain(|_, h| h.until > now);
        }
        self.keys.insert(key.to_owned(), held);
    }
}

/// Units an instance leases beyond a check's own: a tenth of its share of the limit, so the
/// leases of every instance together hold back at most a tenth of it, and none for a limit
/// too small to share (each of its checks asks Redis).
pub fn size(limit: u32, instances: u32) -> u32 {
    (limit / instances.max(1) / LEASE_DIVISOR).min(MAX_LEASE)
}

const LEASE_DIVISOR: u32 = 10;
/// Bounds what one instance holds of a large limit.
const MAX_LEASE: u32 = 100;

#[cfg(test)]
mod tests {
    use super::*;

    const TERMS: Terms = (30, Duration::from_secs(60));

    #[test]
    fn a_lease_grants_its_units_then_redis_decides_again() {
        let mut leases = Leases::default();
        let now = Instant::now();
        let six = Duration::from_secs(6);
        let until = now + six;
        assert_eq!(leases.take("u", 1, TERMS, now), None, "nothing held");
        leases.lease("u", 3, TERMS, six, now);
        assert_eq!(leases.take("u", 2, TERMS, now), Some(Ok(())));
        assert_eq!(leases.take("u", 2, TERMS, now), None, "one left, two asked");
        assert_eq!(leases.take("u", 1, TERMS, now), Some(Ok(())));
        assert_eq!(leases.take("u", 1, TERMS, now), None, "used up");
        leases.lease("u", 3, TERMS, six, now);
        assert_eq!(leases.take("u", 1, TERMS, until), None, "expired");
        assert_eq!(leases.take("u", 1, TERMS, now), None, "and forgotten");
        // Two leases brought at once add up, and last as long as both take to earn back.
        leases.lease("u", 3, TERMS, six, now);
        leases.lease("u", 3, TERMS, six, now);
        assert_eq!(leases.take("u", 6, TERMS, now + six), Some(Ok(())));
        leases.lease("u", 3, TERMS, six, now);
        let lowered = (10, Duration::from_secs(60));
        assert_eq!(leases.take("u", 1, lowered, now), None, "the rule changed");
        assert_eq!(
            leases.take("u", 1, TERMS, now),
            None,
            "and the lease is gone"
        );
    }

    #[test]
    fn a_refusal_stands_until_its_time_for_as_many_units_or_more() {
        let mut leases = Leases::default();
        let now = Instant::now();
        leases.refuse("u", 2, TERMS, now + Duration::from_secs(4), now);
        let soon = now + Duration::from_secs(1);
        let three = Some(Err(Duration::from_secs(3)));
        assert_eq!(leases.take("u", 2, TERMS, soon), three);
        assert_eq!(leases.take("u", 5, TERMS, soon), three);
        assert_eq!(
            leases.take("u", 1, TERMS, soon),
            None,
            "fewer units may fit sooner"
        );
        let raised = (60, Duration::from_secs(60));
        assert_eq!(leases.take("u", 2, raised, soon), None, "the rule changed");
        leases.refuse("u", 2, TERMS, now + Duration::from_secs(4), now);
        assert_eq!(
            leases.take("u", 2, TERMS, now + Duration::from_secs(4)),
            None
        );
    }

    #[test]
    fn leases_are_a_tenth_of_a_share_and_none_of_a_small_limit() {
        for (limit, instances, size) in [
            (30, 1, 3),
            (30, 2, 1),
            (30, 4, 0),
            (5, 1, 0),
            (600, 1, 60),
            (600, 3, 20),
            (6000, 1, 100),
            (10, 0, 1),
        ] {
            assert_eq!(
                super::size(limit, instances),
                size,
                "{limit} over {instances}"
            );
        }
    }
}
