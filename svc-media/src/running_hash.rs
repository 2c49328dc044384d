//! An upload's SHA-256, computed while its parts arrive, so that completing the upload does
//! not read the whole file back from the blob store to hash it.
//!
//! Parts arrive out of order (a client keeps several in flight) and may be re-sent. Each
//! upload's running hash covers its parts `0..next` in order, and remembers the blob key of
//! each part it hashed; a part ahead of `next` waits in memory, within a bound per upload and
//! one for the instance, until the parts before it came. A part that cannot wait is simply
//! not hashed ahead. The running hash is a shortcut, never the truth: the completion compares
//! the keys it hashed with the parts the database holds, keeps the hash only as far as they
//! agree from the first part, and reads the rest from the blob store. An upload whose parts
//! went to several instances, a re-sent part, an instance restarted: each costs reading back,
//! never a wrong hash.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Parts of one upload that may wait for the parts before them.
const WAITING_PARTS_PER_UPLOAD: usize = 16;
/// Bytes of every upload's waiting parts together on this instance.
const WAITING_BYTES: usize = 64 * 1024 * 1024;
/// Uploads with a running hash at once; beyond, the ones untouched the longest are dropped.
const UPLOADS: usize = 4096;
/// An upload not touched for this long has its running hash dropped when room is needed.
const IDLE: Duration = Duration::from_secs(600);

/// What was hashed of one upload: parts `0..keys.len()`, in order.
pub struct Hashed {
    pub hasher: Sha256,
    pub size: i64,
    /// The blob key of each part hashed, by part number.
    pub keys: Vec<String>,
}

struct Running {
    hashed: Hashed,
    /// Parts ahead of the next one to hash: their blob key and bytes.
    waiting: BTreeMap<i32, (String, Bytes)>,
    touched: Instant,
}

/// The running hashes of this instance's uploads.
#[derive(Clone, Default)]
pub struct RunningHashes {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    uploads: HashMap<(i64, i64), Arc<Mutex<Running>>>,
    waiting_bytes: usize,
}

impl RunningHashes {
    /// Part `part` of upload `file_id` of `owner` is stored under `key` with these bytes.
    pub fn offer(&self, owner: i64, file_id: i64, part: i32, key: &str, bytes: Bytes) {
        let upload = {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            if !inner.uploads.contains_key(&(owner, file_id)) {
                if inner.uploads.len() >= UPLOADS {
                    inner.drop_idle();
                }
                if inner.uploads.len() >= UPLOADS {
                    return;
                }
            }
            inner
                .uploads
                .entry((owner, file_id))
                .or_insert_with(|| {
                    Arc::new(Mutex::new(Running {
                        hashed: Hashed {
                            hasher: Sha256::new(),
                            size: 0,
                            keys: Vec::new(),
                        },
                        waiting: BTreeMap::new(),
                        touched: Instant::now(),
                    }))
                })
                .clone()
        };
        // Hashing happens under the upload's own lock, not the instance's.
        let mut running = upload.lock().unwrap_or_else(PoisonError::into_inner);
        running.touched = Instant::now();
        let next = running.hashed.keys.len() as i32;
        if part < next {
            // A re-send of a part hashed already: the completion sees its new key and reads
            // the upload back from there.
            return;
        }
        if part > next {
            let len = bytes.len();
            let replaced = running.waiting.get(&part).map_or(0, |(_, b)| b.len());
            if replaced == 0 && running.waiting.len() >= WAITING_PARTS_PER_UPLOAD {
                return;
            }
            if !self.reserve(len, replaced) {
                return;
            }
            running.waiting.insert(part, (key.to_owned(), bytes));
            return;
        }
        running.hash(key.to_owned(), &bytes);
        let mut freed = 0;
        loop {
            let next = running.hashed.keys.len() as i32;
            let Some((key, bytes)) = running.waiting.remove(&next) else {
                break;
            };
            running.hash(key, &bytes);
            freed += bytes.len();
        }
        drop(running);
        if freed > 0 {
            self.release(freed);
        }
    }

    /// Takes what was hashed ahead of upload `file_id` of `owner` (nothing when no part of it
    /// came to this instance).
    pub fn take(&self, owner: i64, file_id: i64) -> Option<Hashed> {
        let upload = {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inner.uploads.remove(&(owner, file_id))?
        };
        let mut running = upload.lock().unwrap_or_else(PoisonError::into_inner);
        let waiting: usize = running.waiting.values().map(|(_, b)| b.len()).sum();
        running.waiting.clear();
        let hashed = std::mem::replace(
            &mut running.hashed,
            Hashed {
                hasher: Sha256::new(),
                size: 0,
                keys: Vec::new(),
            },
        );
        drop(running);
        self.release(waiting);
        Some(hashed)
    }

    /// Room for `len` more waiting bytes, `replaced` of them given back.
    fn reserve(&self, len: usize, replaced: usize) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let after = inner.waiting_bytes.saturating_sub(replaced) + len;
        if after > WAITING_BYTES {
            return false;
        }
        inner.waiting_bytes = after;
        true
    }

    fn release(&self, len: usize) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.waiting_bytes = inner.waiting_bytes.saturating_sub(len);
    }
}

impl Running {
    fn hash(&mut self, key: String, bytes: &[u8]) {
        self.hashed.hasher.update(bytes);
        self.hashed.size += bytes.len() as i64;
        self.hashed.keys.push(key);
    }
}

impl Inner {
    /// Drops the running hashes of uploads untouched for [`IDLE`], and what they kept waiting.
    fn drop_idle(&mut self) {
        let mut freed = 0;
        self.uploads.retain(|_, upload| {
            let running = upload.lock().unwrap_or_else(PoisonError::into_inner);
            let keep = running.touched.elapsed() < IDLE;
            if !keep {
                freed += running
                    .waiting
                    .values()
                    .map(|(_, b)| b.len())
                    .sum::<usize>();
            }
            keep
        });
        self.waiting_bytes = self.waiting_bytes.saturating_sub(freed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(n: u8) -> Bytes {
        Bytes::from(vec![n; 1000])
    }

    fn digest_of(parts: &[u8]) -> Vec<u8> {
        let mut h = Sha256::new();
        for n in parts {
            h.update(part(*n));
        }
        h.finalize().to_vec()
    }

    #[test]
    fn parts_out_of_order_hash_in_order() -> Result<(), &'static str> {
        let hashes = RunningHashes::default();
        for n in [2u8, 0, 3, 1] {
            hashes.offer(7, 9, n.into(), &format!("k{n}"), part(n));
        }
        let hashed = hashes.take(7, 9).ok_or("no running hash")?;
        assert_eq!(hashed.keys, ["k0", "k1", "k2", "k3"]);
        assert_eq!(hashed.size, 4000);
        assert_eq!(hashed.hasher.finalize().to_vec(), digest_of(&[0, 1, 2, 3]));
        assert_eq!(hashes.inner.lock().map(|i| i.waiting_bytes).ok(), Some(0));
        assert!(hashes.take(7, 9).is_none(), "taken once");
        Ok(())
    }

    #[test]
    fn a_part_that_cannot_wait_stops_the_hash_before_it() -> Result<(), &'static str> {
        let hashes = RunningHashes::default();
        hashes.offer(1, 1, 0, "k0", part(0));
        // Parts 2..=17 wait; part 18 finds no room (16 at most per upload) and is not kept.
        for n in 2u8..=18 {
            hashes.offer(1, 1, n.into(), &format!("k{n}"), part(n));
        }
        hashes.offer(1, 1, 1, "k1", part(1));
        let hashed = hashes.take(1, 1).ok_or("no running hash")?;
        assert_eq!(hashed.keys.len(), 18, "parts 0..=17, not 18");
        assert_eq!(
            hashed.hasher.finalize().to_vec(),
            digest_of(&(0u8..=17).collect::<Vec<_>>())
        );
        Ok(())
    }

    #[test]
    fn a_resent_part_waiting_replaces_the_first_and_a_hashed_one_is_left_alone()
    -> Result<(), &'static str> {
        let hashes = RunningHashes::default();
        hashes.offer(1, 2, 1, "old1", part(9));
        hashes.offer(1, 2, 1, "new1", part(1));
        hashes.offer(1, 2, 0, "k0", part(0));
        hashes.offer(1, 2, 0, "again0", part(5));
        let hashed = hashes.take(1, 2).ok_or("no running hash")?;
        assert_eq!(hashed.keys, ["k0", "new1"]);
        assert_eq!(hashed.hasher.finalize().to_vec(), digest_of(&[0, 1]));
        Ok(())
    }

    #[test]
    fn uploads_are_kept_apart() {
        let hashes = RunningHashes::default();
        hashes.offer(1, 5, 0, "a0", part(1));
        hashes.offer(2, 5, 0, "b0", part(2));
        assert_eq!(hashes.take(1, 5).map(|h| h.keys), Some(vec!["a0".into()]));
        assert_eq!(hashes.take(2, 5).map(|h| h.keys), Some(vec!["b0".into()]));
    }
}
