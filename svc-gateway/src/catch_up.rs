//! Pacing of catch-ups in a reconnect storm: an instance runs at most `[streams]
//! max_concurrent_catch_up` replays and GetDifference calls at once. A device turned away is
//! told when to come back, with a wait drawn from `[retry_after_ms, 2 × retry_after_ms)`, so
//! that the devices of one wave spread over the next second or so instead of returning
//! together; the ones let in are served at full speed rather than all slowly.

use std::{sync::Arc, time::Duration};

use rand::Rng;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The catch-up slots of one gateway instance.
pub struct CatchUpSlots {
    /// `None`: no cap.
    slots: Option<Arc<Semaphore>>,
    retry_after: Duration,
}

/// A catch-up's slot, free again when dropped (or no slot at all, when there is no cap).
pub struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
}

impl CatchUpSlots {
    pub fn new(max_concurrent: usize, retry_after: Duration) -> Self {
        Self {
            slots: (max_concurrent > 0).then(|| Arc::new(Semaphore::new(max_concurrent))),
            retry_after: retry_after.max(Duration::from_millis(1)),
        }
    }

    /// A slot now, or how long the device should wait before asking again.
    pub fn take(&self) -> Result<Slot, Duration> {
        let Some(slots) = &self.slots else {
            return Ok(Slot { _permit: None });
        };
        match slots.clone().try_acquire_owned() {
            Ok(permit) => Ok(Slot {
                _permit: Some(permit),
            }),
            Err(_) => {
                crate::metrics::catch_up_paced();
                Err(self.jittered_wait())
            }
        }
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
        let slots = CatchUpSlots::new(2, Duration::from_millis(500));
        let first = slots.take();
        let second = slots.take();
        assert!(first.is_ok() && second.is_ok());
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
        drop(first);
        assert!(slots.take().is_ok(), "a freed slot is taken again");
    }

    #[test]
    fn without_a_cap_every_catch_up_runs() {
        let slots = CatchUpSlots::new(0, Duration::from_millis(500));
        let held: Vec<_> = (0..1000).map(|_| slots.take()).collect();
        assert!(held.iter().all(Result::is_ok));
    }
}
