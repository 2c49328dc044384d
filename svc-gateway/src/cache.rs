//! In-process caches of the gateway's hot lookups.
//!
//! Auth keys: every call resolves its key, so keys are kept for long (`AUTH_KEY_TTL`) rather
//! than read from Postgres again every few seconds. What keeps a cached key honest is
//! [`forget_rebound_keys`]: once a second it asks which keys were signed in or out since it
//! last asked (on any instance) and drops them, so a sign-out through another instance takes
//! effect here within about `CHECK_EVERY`. A key signed out on this instance is dropped at once.
//! While those checks fail, no cached key is trusted past `TRUST_UNCHECKED`: calls read their
//! key from Postgres, as without a cache.
//!
//! MTProto keys: the key an MTProto key's calls act as (itself, or the permanent key a
//! temporary key is bound to) is kept under the same rules. Binding a temporary key, and the
//! end of the one it replaces, count as rebinding both keys, so an instance that cached either
//! drops it within about `CHECK_EVERY` (the instance that bound it, at once), and a replaced
//! temporary key stops acting for its permanent key everywhere within that bound.
//!
//! Users are never deleted, so a user known to exist stays known.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
    time::{Duration, Instant},
};

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::accounts;

/// Longest a cached key is used without being read again, however the checks go.
const AUTH_KEY_TTL: Duration = Duration::from_secs(600);
/// How often an instance asks which keys were signed in or out.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long after the last successful check cached keys are still used.
const TRUST_UNCHECKED: Duration = Duration::from_secs(3);
/// How far back each check looks before the previous one: a sign-in or sign-out is dated when
/// its statement starts, and may commit after a check that began later.
const CHECK_OVERLAP: chrono::TimeDelta = chrono::TimeDelta::seconds(5);
/// Keys one check drops one by one; past that it drops every cached key.
const CHANGES_PER_CHECK: i64 = 10_000;
/// Entries kept before a cache starts over (bounds memory).
const MAX_ENTRIES: usize = 200_000;

#[derive(Clone)]
pub struct CachedKey {
    pub secret_hash: Vec<u8>,
    pub user_id: Option<i64>,
}

#[derive(Default)]
pub struct Caches {
    auth_keys: Mutex<AuthKeys>,
    users: Mutex<HashSet<i64>>,
}

#[derive(Default)]
struct AuthKeys {
    keys: HashMap<i64, (CachedKey, Instant)>,
    /// MTProto key id → the `x-oxigram-auth-key` value of the key its calls act as.
    acting: HashMap<i64, (String, Instant)>,
    /// When the last check of rebound keys succeeded; none yet, nothing is trusted.
    checked: Option<Instant>,
}

impl Caches {
    pub fn auth_key(&self, id: i64) -> Option<CachedKey> {
        let cache = self.auth_keys.lock().ok()?;
        if !cache.trusted() {
            return None;
        }
        let (key, at) = cache.keys.get(&id)?;
        (at.elapsed() < AUTH_KEY_TTL).then(|| key.clone())
    }

    pub fn put_auth_key(&self, id: i64, key: CachedKey) {
        if let Ok(mut cache) = self.auth_keys.lock() {
            put(&mut cache.keys, id, key);
        }
    }

    /// The header value of the key an MTProto key's calls act as, if cached and trusted.
    pub fn acting_key(&self, id: i64) -> Option<String> {
        let cache = self.auth_keys.lock().ok()?;
        if !cache.trusted() {
            return None;
        }
        let (header, at) = cache.acting.get(&id)?;
        (at.elapsed() < AUTH_KEY_TTL).then(|| header.clone())
    }

    pub fn put_acting_key(&self, id: i64, header: String) {
        if let Ok(mut cache) = self.auth_keys.lock() {
            put(&mut cache.acting, id, header);
        }
    }

    /// These MTProto keys were bound or ended on this instance: their acting key is read from
    /// Postgres next time.
    pub fn forget_acting_keys(&self, ids: &[i64]) {
        if let Ok(mut cache) = self.auth_keys.lock() {
            for id in ids {
                cache.acting.remove(id);
            }
        }
    }

    /// The key's binding changed (sign-in, sign-out, reset): read it from Postgres next time.
    pub fn forget_auth_key(&self, id: i64) {
        if let Ok(mut cache) = self.auth_keys.lock() {
            cache.keys.remove(&id);
        }
    }

    /// A check found these keys rebound since the one before (`None`: too many to name).
    fn rebound(&self, ids: Option<&[i64]>, checked: Instant) {
        if let Ok(mut cache) = self.auth_keys.lock() {
            match ids {
                Some(ids) => ids.iter().for_each(|id| {
                    cache.keys.remove(id);
                    cache.acting.remove(id);
                }),
                None => {
                    cache.keys.clear();
                    cache.acting.clear();
                }
            }
            cache.checked = Some(checked);
        }
    }

    pub fn user_exists(&self, id: i64) -> bool {
        self.users.lock().is_ok_and(|u| u.contains(&id))
    }

    pub fn remember_user(&self, id: i64) {
        if let Ok(mut users) = self.users.lock() {
            if users.len() >= MAX_ENTRIES {
                users.clear();
            }
            users.insert(id);
        }
    }
}

impl AuthKeys {
    /// Whether the last check of rebound keys is recent enough to use what is cached.
    fn trusted(&self) -> bool {
        self.checked
            .is_some_and(|at| at.elapsed() < TRUST_UNCHECKED)
    }
}

/// Caches `value` under `id`, starting over past `MAX_ENTRIES` (expired entries go first).
fn put<V>(entries: &mut HashMap<i64, (V, Instant)>, id: i64, value: V) {
    if entries.len() >= MAX_ENTRIES {
        entries.retain(|_, (_, at)| at.elapsed() < AUTH_KEY_TTL);
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
    }
    entries.insert(id, (value, Instant::now()));
}

/// Drops from `caches`, every `CHECK_EVERY`, the keys signed in or out anywhere since the
/// check before, until `shutdown`.
pub async fn forget_rebound_keys(caches: &Caches, pool: &PgPool, shutdown: &CancellationToken) {
    let mut ticks = tokio::time::interval(CHECK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first check names every key ever bound, past the limit: the cache starts over.
    let mut since = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    let mut failing = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        // The moment the check starts bounds what it can vouch for.
        let started = Instant::now();
        match accounts::rebound_auth_keys(pool, since, CHANGES_PER_CHECK).await {
            Ok(rebound) => {
                if failing {
                    tracing::info!("auth key changes are read again; cached keys trusted again");
                }
                failing = false;
                let named = (rebound.auth_key_ids.len() < CHANGES_PER_CHECK as usize)
                    .then_some(rebound.auth_key_ids.as_slice());
                caches.rebound(named, started);
                since = rebound.checked_at - CHECK_OVERLAP;
            }
            Err(error) => {
                if !failing {
                    tracing::warn!(%error, "cannot read auth key changes; cached keys not trusted until it can");
                }
                failing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(user_id: i64) -> CachedKey {
        CachedKey {
            secret_hash: vec![1],
            user_id: Some(user_id),
        }
    }

    #[test]
    fn keys_are_trusted_only_after_a_recent_check_and_rebound_ones_are_dropped() {
        let caches = Caches::default();
        caches.put_auth_key(1, key(10));
        caches.put_auth_key(2, key(20));
        assert!(caches.auth_key(1).is_none(), "no check yet");
        caches.rebound(Some(&[2]), Instant::now());
        assert_eq!(caches.auth_key(1).and_then(|k| k.user_id), Some(10));
        assert!(caches.auth_key(2).is_none(), "rebound since");
        caches.rebound(None, Instant::now());
        assert!(
            caches.auth_key(1).is_none(),
            "too many rebound: all dropped"
        );
        caches.put_auth_key(1, key(10));
        caches.rebound(Some(&[]), Instant::now() - TRUST_UNCHECKED);
        assert!(caches.auth_key(1).is_none(), "the last check is too old");
    }

    #[test]
    fn acting_keys_follow_the_same_checks_and_bound_keys_are_dropped_here_at_once() {
        let caches = Caches::default();
        caches.put_acting_key(1, "5:aa".into());
        caches.put_acting_key(2, "5:aa".into());
        caches.put_acting_key(3, "3:bb".into());
        assert!(caches.acting_key(1).is_none(), "no check yet");
        caches.rebound(Some(&[2]), Instant::now());
        assert_eq!(caches.acting_key(1).as_deref(), Some("5:aa"));
        assert!(caches.acting_key(2).is_none(), "rebound elsewhere since");
        // A bind on this instance: the new and the ended key are read again at once.
        caches.forget_acting_keys(&[1, 3]);
        assert!(caches.acting_key(1).is_none());
        assert!(caches.acting_key(3).is_none());
        caches.put_acting_key(1, "5:aa".into());
        caches.rebound(None, Instant::now());
        assert!(
            caches.acting_key(1).is_none(),
            "too many rebound: all dropped"
        );
        caches.put_acting_key(1, "5:aa".into());
        caches.rebound(Some(&[]), Instant::now() - TRUST_UNCHECKED);
        assert!(caches.acting_key(1).is_none(), "the last check is too old");
    }
}
