//! Pacing of catch-ups in a reconnect storm: an instance runs at most `[streams]
//! max_concurrent_catch_up` replays and GetDifference calls at once, and starts at most
//! `catch_ups_per_second` of them (0: as fast as slots free up). Past the cap a catch-up
//! waits in a line of up to `catch_up_line` places, served in the order it came as soon as a
//! slot is free (a GetDifference call only as long as a device turned away would wait). Past
//! the line a device is told when to come back: at its turn in a queue that moves as fast as
//! slots free up (the cap over the mean time a slot is held) or as the rate allows, whichever
//! is slower, after half the line ahead of it has gone, and never sooner than a wait drawn
//! from `[retry_after_ms, 2 × retry_after_ms)`.
//!
//! The line is what keeps every slot busy through a storm: a turn told in advance is only a
//! guess of when a slot will be free, and the guesses made as a storm begins, while the
//! instance is busy answering every device at once, are the slowest of all, so devices sent
//! away come back later than slots free up and slots stand idle. A device in line asks
//! nothing again and costs what its open stream costs anyway.
//!
//! Either bound keeps a storm from taking every core the sends need (catch-ups that only
//! wait for slots run as fast as the machine allows). A catch-up is one chain of work (a log
//! read, a message read, the events handed to the stream), busy in one process at a time,
//! so a small cap bounds how many of the backend's cores a storm takes, whatever their speed;
//! a rate bounds the same share only on the machine it was chosen for.

use std::{
    num::NonZeroU32,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use rand::Rng;
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};

/// What a slot is assumed to be held for before any has been given back.
const FIRST_HOLD: Duration = Duration::from_millis(100);
/// How far ahead of the rate a catch-up may start: a device back at its turn a little early
/// still gets in, and a quiet instance lets a few in at once.
const RATE_TOLERANCE: Duration = Duration::from_millis(100);

/// The catch-up slots of one gateway instance.
pub struct CatchUpSlots {
    /// The cap and its permits (None: no cap).
    cap: Option<(NonZeroU32, Arc<Semaphore>)>,
    /// The time between two starts at the rate (None: no rate).
    spacing: Option<Duration>,
    retry_after: Duration,
    /// How long a slot is held, in ns: a moving average of the slots given back. Apart from
    /// the queue so that a catch-up let in under the cap alone takes no lock.
    mean_hold: Arc<AtomicU64>,
    /// How many catch-ups may wait in line for a slot (0: none).
    line: usize,
    /// How many wait in line now.
    waiting: Arc<AtomicUsize>,
    queue: Mutex<Queue>,
}

/// How a catch-up gets in: a slot at once, or a place in line to wait for one.
pub enum Entry {
    Now(Slot),
    Line(Place),
}

/// A place in the line for a slot; given up when dropped.
pub struct Place {
    waiting: Arc<AtomicUsize>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        crate::metrics::catch_up_line(-1);
    }
}

/// The turns given out to devices turned away, and the rate's clock.
struct Queue {
    /// The turn given to the last device turned away.
    last_turn: Instant,
    /// When the next catch-up is due at the rate (a start before it, by more than the
    /// tolerance, runs ahead of the rate).
    next_start: Instant,
}

/// A catch-up's slot, free again when dropped (or no slot at all, when there is no cap).
pub struct Slot {
    _held: Option<Held>,
}

struct Held {
    _permit: OwnedSemaphorePermit,
    taken: Instant,
    mean_hold: Arc<AtomicU64>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let held = duration_ns(self.taken.elapsed());
        // An eighth of each new hold: steady under noise, yet a storm's slower catch-ups
        // move it within a few dozen.
        let _ = self
            .mean_hold
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |mean| {
                Some(mean - mean / 8 + held / 8)
            });
    }
}

impl CatchUpSlots {
    /// `max_concurrent` catch-ups at once (0: no cap), started at most `per_second` a second
    /// (0: no rate), up to `line` of them waiting for a slot; a device turned away waits at
    /// least `retry_after`.
    pub fn new(max_concurrent: usize, per_second: u32, line: usize, retry_after: Duration) -> Self {
        let now = Instant::now();
        let cap = NonZeroU32::new(u32::try_from(max_concurrent).unwrap_or(u32::MAX)).map(|cap| {
            let permits = (cap.get() as usize).min(Semaphore::MAX_PERMITS);
            (cap, Arc::new(Semaphore::new(permits)))
        });
        Self {
            cap,
            spacing: (per_second > 0).then(|| Duration::from_secs(1) / per_second),
            retry_after: retry_after.max(Duration::from_millis(1)),
            mean_hold: Arc::new(AtomicU64::new(duration_ns(FIRST_HOLD))),
            line,
            waiting: Arc::new(AtomicUsize::new(0)),
            queue: Mutex::new(Queue {
                last_turn: now,
                next_start: now,
            }),
        }
    }

    fn held(&self, permit: Option<OwnedSemaphorePermit>) -> Slot {
        // The hold is measured only under a cap, the one thing that reads it.
        Slot {
            _held: permit.map(|permit| Held {
                _permit: permit,
                taken: Instant::now(),
                mean_hold: self.mean_hold.clone(),
            }),
        }
    }

    /// A permit the cap (None: no cap) and the rate let start now, or Err.
    fn permit_now(&self) -> Result<Option<OwnedSemaphorePermit>, ()> {
        let Some(spacing) = self.spacing else {
            // The cap alone: a free permit is all it takes, with no lock.
            return self.free_permit();
        };
        let now = Instant::now();
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let permit = match queue.next_start > now + RATE_TOLERANCE {
            true => Err(()),
            false => self.free_permit(),
        };
        if permit.is_ok() {
            queue.next_start = queue.next_start.max(now) + spacing;
        }
        permit
    }

    /// A slot now, else a place in line when there is room (only under a cap), else how long
    /// the device should wait before asking again.
    pub fn enter(&self) -> Result<Entry, Duration> {
        if let Ok(permit) = self.permit_now() {
            return Ok(Entry::Now(self.held(permit)));
        }
        match self.place_in_line() {
            Some(place) => Ok(Entry::Line(place)),
            None => Err(self.turned_away()),
        }
    }

    /// A place in line, when there is a cap to wait for and room.
    fn place_in_line(&self) -> Option<Place> {
        self.cap.as_ref()?;
        self.waiting
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.line).then_some(n + 1)
            })
            .ok()?;
        crate::metrics::catch_up_line(1);
        Some(Place {
            waiting: self.waiting.clone(),
        })
    }

    /// The slot of an entry: at once, or when the line has moved up to it (and the rate, if
    /// any, lets it start); None only if the slots are closed, which they never are.
    pub async fn slot(&self, entry: Entry) -> Option<Slot> {
        let place = match entry {
            Entry::Now(slot) => return Some(slot),
            Entry::Line(place) => place,
        };
        let (_, permits) = self.cap.as_ref()?;
        let permit = permits.clone().acquire_owned().await.ok()?;
        drop(place);
        if let Some(spacing) = self.spacing {
            let start = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                let start = queue.next_start.max(Instant::now());
                queue.next_start = start + spacing;
                start
            };
            tokio::time::sleep_until(start).await;
        }
        Some(self.held(Some(permit)))
    }

    /// The slot of an entry within `limit`, or (its place given up) how long the device should
    /// wait before asking again: for a call that cannot wait as long as a stream can.
    pub async fn slot_within(&self, entry: Entry, limit: Duration) -> Result<Slot, Duration> {
        match tokio::time::timeout(limit, self.slot(entry)).await {
            Ok(Some(slot)) => Ok(slot),
            Ok(None) | Err(_) => Err(self.turned_away()),
        }
    }

    /// A permit of the cap (None: no cap), or Err when every slot is taken.
    fn free_permit(&self) -> Result<Option<OwnedSemaphorePermit>, ()> {
        match &self.cap {
            None => Ok(None),
            Some((_, permits)) => permits.clone().try_acquire_owned().map(Some).map_err(drop),
        }
    }

    /// The wait of a device turned away now: until its turn, and never less than a jittered
    /// least wait.
    fn turned_away(&self) -> Duration {
        crate::metrics::catch_up_paced();
        let now = Instant::now();
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let turn = self.turn(&mut queue, now);
        drop(queue);
        turn.max(self.jittered_wait())
    }

    /// The wait until a device's turn: the turn given before it, then one slot's share of the
    /// mean hold or the time between two starts at the rate, whichever is longer; and never
    /// before the rate's next start.
    fn turn(&self, queue: &mut Queue, now: Instant) -> Duration {
        // No cap: no slot's share of the hold spaces the turns, only the rate.
        let slots_free_every = self.cap.as_ref().map_or(Duration::ZERO, |(cap, _)| {
            Duration::from_nanos(self.mean_hold.load(Ordering::Relaxed)) / cap.get()
        });
        let step = slots_free_every.max(self.spacing.unwrap_or_default());
        // Back when half the line ahead has gone: room in it by then, and the rest of it
        // still keeps the slots busy.
        let half_line =
            step * u32::try_from(self.waiting.load(Ordering::Relaxed) / 2).unwrap_or(u32::MAX);
        let turn = (queue.last_turn.max(now + half_line) + step).max(queue.next_start);
        queue.last_turn = turn;
        turn - now
    }

    fn jittered_wait(&self) -> Duration {
        let base = self.retry_after.as_millis() as u64;
        Duration::from_millis(rand::rng().random_range(base..base.saturating_mul(2).max(base + 1)))
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_devices_are_told_jittered_waits_until_a_slot_frees() {
        // Twenty slots held 100 ms each (the first assumption): a turn every 5 ms, so the
        // fifty turned away are all due before the least wait.
        let slots = CatchUpSlots::new(20, 0, 0, Duration::from_millis(500));
        let mut held: Vec<_> = (0..20).map(|_| slots.enter()).collect();
        assert!(held.iter().all(Result::is_ok));
        let waits: Vec<Duration> = (0..50).filter_map(|_| slots.enter().err()).collect();
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
        assert!(slots.enter().is_ok(), "a freed slot is taken again");
    }

    #[test]
    fn a_queue_longer_than_the_least_wait_is_given_turns_as_fast_as_slots_free() {
        // Two slots held 100 ms each (the first assumption): a turn every 50 ms.
        let slots = CatchUpSlots::new(2, 0, 0, Duration::from_millis(10));
        let _held = [slots.enter(), slots.enter()];
        let waits: Vec<Duration> = (0..1000).filter_map(|_| slots.enter().err()).collect();
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
        let slots = CatchUpSlots::new(1, 0, 0, Duration::from_millis(1));
        let spare = Arc::new(Semaphore::new(32));
        for _ in 0..32 {
            let Ok(permit) = spare.clone().try_acquire_owned() else {
                panic!("the spare semaphore has a permit for each");
            };
            drop(Held {
                _permit: permit,
                taken: Instant::now() - Duration::from_secs(1),
                mean_hold: slots.mean_hold.clone(),
            });
        }
        let _held = slots.enter();
        // Held a second each, one slot: the next device's turn is about a second away.
        let wait = slots.enter().err().unwrap_or_default();
        assert!(
            (Duration::from_millis(900)..Duration::from_millis(1_100)).contains(&wait),
            "{wait:?}"
        );
    }

    #[test]
    fn without_a_cap_every_catch_up_runs() {
        let slots = CatchUpSlots::new(0, 0, 0, Duration::from_millis(500));
        let held: Vec<_> = (0..1000).map(|_| slots.enter()).collect();
        assert!(held.iter().all(Result::is_ok));
    }

    #[test]
    fn at_a_rate_catch_ups_start_no_faster_than_it_and_the_rest_get_turns_at_it() {
        // 100 a second, slots to spare: the first ones within the tolerance (100 ms ahead,
        // ten starts) get in at once; the next ones are turned away with turns 10 ms apart,
        // from the rate's next start on.
        let slots = CatchUpSlots::new(1000, 100, 0, Duration::from_millis(1));
        let held: Vec<_> = (0..11).map(|_| slots.enter()).collect();
        assert!(held.iter().all(Result::is_ok), "eleven start at once");
        let waits: Vec<Duration> = (0..50).filter_map(|_| slots.enter().err()).collect();
        assert_eq!(waits.len(), 50, "past the tolerance every device waits");
        assert!(waits.windows(2).all(|w| w[1] > w[0]), "{waits:?}");
        let last = waits[49];
        assert!(
            (Duration::from_millis(590)..Duration::from_millis(610)).contains(&last),
            "the fiftieth turn is 60 starts away: {last:?}"
        );
        // Without a cap, the rate alone paces, and spaces the turns.
        let slots = CatchUpSlots::new(0, 100, 0, Duration::from_millis(1));
        let (started, waits): (Vec<_>, Vec<_>) =
            (0..100).map(|_| slots.enter()).partition(Result::is_ok);
        assert_eq!(
            started.len(),
            11,
            "the tolerance's worth starts, the rest wait"
        );
        let waits: Vec<Duration> = waits.into_iter().filter_map(Result::err).collect();
        let last = waits[88];
        assert!(
            (Duration::from_millis(980)..Duration::from_millis(1_010)).contains(&last),
            "the 89th turn is 99 starts away: {last:?}"
        );
    }

    #[tokio::test]
    async fn past_the_cap_catch_ups_wait_in_line_and_get_slots_in_the_order_they_came() {
        let slots = Arc::new(CatchUpSlots::new(1, 0, 3, Duration::from_millis(500)));
        let Ok(Entry::Now(first)) = slots.enter() else {
            panic!("a free slot is taken at once");
        };
        let places: Vec<Entry> = (0..3)
            .map(|_| slots.enter())
            .collect::<Result<_, _>>()
            .unwrap_or_else(|wait| panic!("three places in line, turned away for {wait:?}"));
        assert!(places.iter().all(|e| matches!(e, Entry::Line(_))));
        assert_eq!(slots.waiting.load(Ordering::Relaxed), 3);
        let Err(wait) = slots.enter() else {
            panic!("past the line a device is turned away");
        };
        assert!(wait >= Duration::from_millis(500), "{wait:?}");

        let (served_tx, mut served) = tokio::sync::mpsc::unbounded_channel();
        for (n, entry) in places.into_iter().enumerate() {
            let (slots, served_tx) = (slots.clone(), served_tx.clone());
            tokio::spawn(async move {
                let slot = slots.slot(entry).await;
                let _ = served_tx.send(n);
                // Held a moment, then given back to the next in line.
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(slot);
            });
            // Each waits on the slot before the next one joins.
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            served.try_recv().is_err(),
            "no one is served while the slot is held"
        );
        drop(first);
        let mut order = Vec::new();
        for _ in 0..3 {
            let next = tokio::time::timeout(Duration::from_secs(5), served.recv()).await;
            order.push(next.ok().flatten().unwrap_or(usize::MAX));
        }
        assert_eq!(order, [0, 1, 2], "served in the order they came");
        assert_eq!(
            slots.waiting.load(Ordering::Relaxed),
            0,
            "the line is empty"
        );
    }

    #[tokio::test]
    async fn a_place_given_up_leaves_room_and_a_bounded_wait_turns_the_device_away() {
        let slots = CatchUpSlots::new(1, 0, 1, Duration::from_millis(200));
        let Ok(Entry::Now(_held)) = slots.enter() else {
            panic!("a free slot is taken at once");
        };
        let Ok(place) = slots.enter() else {
            panic!("one place in line");
        };
        assert!(slots.enter().is_err(), "the line is full");
        drop(place);
        assert!(
            matches!(slots.enter(), Ok(Entry::Line(_))),
            "a place given up is free again"
        );
        let Ok(place) = slots.enter() else {
            panic!("one place in line");
        };
        let started = Instant::now();
        let outcome = slots.slot_within(place, Duration::from_millis(50)).await;
        assert!(started.elapsed() >= Duration::from_millis(50));
        let Err(wait) = outcome else {
            panic!("the slot is still held");
        };
        assert!(wait >= Duration::from_millis(200), "{wait:?}");
        assert_eq!(
            slots.waiting.load(Ordering::Relaxed),
            0,
            "its place was given up"
        );
    }

    #[test]
    fn without_a_cap_there_is_no_line() {
        let slots = CatchUpSlots::new(0, 0, 100, Duration::from_millis(500));
        assert!((0..200).all(|_| matches!(slots.enter(), Ok(Entry::Now(_)))));
        assert_eq!(slots.waiting.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_device_turned_away_past_the_line_comes_back_when_half_of_it_has_gone() {
        // One slot held 100 ms (the first assumption), 100 waiting: a turn every 100 ms, so
        // the first device past the line is due after the 50 ahead of it, then one more.
        let slots = CatchUpSlots::new(1, 0, 100, Duration::from_millis(1));
        let entries: Vec<_> = (0..101).map(|_| slots.enter()).collect();
        assert!(entries.iter().all(Result::is_ok));
        let Err(wait) = slots.enter() else {
            panic!("the line is full");
        };
        assert!(
            (Duration::from_millis(5_000)..Duration::from_millis(5_200)).contains(&wait),
            "{wait:?}"
        );
    }
}
