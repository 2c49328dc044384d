//! Pacing of catch-ups in a reconnect storm: an instance runs at most `[streams]
//! max_concurrent_catch_up` replays and GetDifference calls at once. A device turned away is
//! told when to come back: at its turn in a queue that moves as fast as slots free up (the
//! cap over the mean time a slot is held), and never sooner than a wait drawn from
//! `[retry_after_ms, 2 × retry_after_ms)`. The ones let in are served at full speed rather
//! than all slowly, and each device turned away comes back about once, when a slot is likely
//! free, instead of asking again every second until it happens to find one.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use rand::Rng;
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};

/// What a slot is assumed to be held for before any has been given back.
const FIRST_HOLD: Duration = Duration::from_millis(100);

/// The catch-up slots of one gateway instance.
pub struct CatchUpSlots {
    /// `None`: no cap.
    slots: Option<Arc<Semaphore>>,
    cap: u32,
    retry_after: Duration,
    queue: Arc<Mutex<Queue>>,
}

/// The turns given out to devices turned away.
struct Queue {
    /// The turn given to the last device turned away.
    last_turn: Instant,
    /// How long a slot is held, a moving average of the slots given back.
    mean_hold: Duration,
}

/// A catch-up's slot, free again when dropped (or no slot at all, when there is no cap).
pub struct Slot {
    held: Option<(OwnedSemaphorePermit, Instant, Arc<Mutex<Queue>>)>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some((_, taken, queue)) = &self.held {
            let held = taken.elapsed();
            let mut queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.given_back(held);
        }
    }
}

impl Queue {
    fn given_back(&mut self, held: Duration) {
        // An eighth of each new hold: steady under noise, yet a storm's slower catch-ups
        // move it within a few dozen.
        self.mean_hold = (self.mean_hold * 7 + held) / 8;
    }
}

impl CatchUpSlots {
    pub fn new(max_concurrent: usize, retry_after: Duration) -> Self {
        Self {
            slots: (max_concurrent > 0).then(|| Arc::new(Semaphore::new(max_concurrent))),
            cap: u32::try_from(max_concurrent.max(1)).unwrap_or(u32::MAX),
            retry_after: retry_after.max(Duration::from_millis(1)),
            queue: Arc::new(Mutex::new(Queue {
                last_turn: Instant::now(),
                mean_hold: FIRST_HOLD,
            })),
        }
    }

    /// A slot now, or how long the device should wait before asking again.
    pub fn take(&self) -> Result<Slot, Duration> {
        let Some(slots) = &self.slots else {
            return Ok(Slot { held: None });
        };
        match slots.clone().try_acquire_owned() {
            Ok(permit) => Ok(Slot {
                held: Some((permit, Instant::now(), self.queue.clone())),
            }),
            Err(_) => {
                crate::metrics::catch_up_paced();
                Err(self.turn())
            }
        }
    }

    /// The wait of a device turned away now: until its turn, one slot's share of the mean
    /// hold after the turn given before it, or the jittered least wait if that comes later.
    fn turn(&self) -> Duration {
        let now = Instant::now();
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let turn = queue.last_turn.max(now) + queue.mean_hold / self.cap;
        queue.last_turn = turn;
        drop(queue);
        (turn - now).max(self.jittered_wait())
    }

    fn jittered_wait(&self) -> Duration {
        let base = self.retry_after.as_millis() as u64;
        Duration::from_millis(rand::rng().random_range(base..base.saturating_mul(2).max(base + 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_devices_are_told_jittered_waits_until_a_slot_frees() {
        // Twenty slots held 100 ms each (the first assumption): a turn every 5 ms, so the
        // fifty turned away are all due before the least wait.
        let slots = CatchUpSlots::new(20, Duration::from_millis(500));
        let mut held: Vec<_> = (0..20).map(|_| slots.take()).collect();
        assert!(held.iter().all(Result::is_ok));
        let waits: Vec<Duration> = (0..50).filter_map(|_| slots.take().err()).collect();
        assert_eq!(waits.len(), 50, "every device past the cap waits");
        assert!(
            waits
                .iter()
                .all(|w| (Duration::from_millis(500)..Duration::from_millis(1000)).contains(w)),
            "{waits:?}"
        );
        let distinct: std::collections::HashSet<_> = waits.iter().collect();
        assert!(distinct.len() > 10, "the waits are spread: {distinct:?}");
        held.pop();
        assert!(slots.take().is_ok(), "a freed slot is taken again");
    }

    #[test]
    fn a_queue_longer_than_the_least_wait_is_given_turns_as_fast_as_slots_free() {
        // Two slots held 100 ms each (the first assumption): a turn every 50 ms.
        let slots = CatchUpSlots::new(2, Duration::from_millis(10));
        let _held = [slots.take(), slots.take()];
        let waits: Vec<Duration> = (0..1000).filter_map(|_| slots.take().err()).collect();
        assert_eq!(waits.len(), 1000);
        // The thousandth device comes back after about 1000 × 50 ms, not after 10 to 20 ms.
        let last = waits[999];
        assert!(
            (Duration::from_millis(49_000)..Duration::from_millis(51_000)).contains(&last),
            "{last:?}"
        );
        assert!(
            waits.windows(2).all(|w| w[1] >= w[0]),
            "turns are given in order"
        );
        let hundredth = waits[99];
        assert!(
            (Duration::from_millis(4_900)..Duration::from_millis(5_100)).contains(&hundredth),
            "{hundredth:?}"
        );
    }

    #[test]
    fn the_turns_follow_how_long_slots_are_held() {
        let slots = CatchUpSlots::new(1, Duration::from_millis(1));
        for _ in 0..32 {
            let mut queue = slots.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.given_back(Duration::from_secs(1));
        }
        let _held = slots.take();
        // Held a second each, one slot: the next device's turn is about a second away.
        let wait = slots.take().err().unwrap_or_default();
        assert!(
            (Duration::from_millis(900)..Duration::from_millis(1_100)).contains(&wait),
            "{wait:?}"
        );
    }

    #[test]
    fn without_a_cap_every_catch_up_runs() {
        let slots = CatchUpSlots::new(0, Duration::from_millis(500));
        let held: Vec<_> = (0..1000).map(|_| slots.take()).collect();
        assert!(held.iter().all(Result::is_ok));
    }
}
