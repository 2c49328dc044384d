//! In-process caches of the gateway's hot lookups. Auth keys are cached briefly: a key signed
//! out on this instance is dropped at once, one signed out through another instance stops
//! working within `AUTH_KEY_TTL`. Users are never deleted, so a user known to exist stays known.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
    time::{Duration, Instant},
};

/// How long another instance's sign-out may take to reach this one.
pub const AUTH_KEY_TTL: Duration = Duration::from_secs(2);
/// Entries kept before a cache starts over (bounds memory).
const MAX_ENTRIES: usize = 200_000;

#[derive(Clone)]
pub struct CachedKey {
    pub secret_hash: Vec<u8>,
    pub user_id: Option<i64>,
}

#[derive(Default)]
pub struct Caches {
    auth_keys: Mutex<HashMap<i64, (CachedKey, Instant)>>,
    users: Mutex<HashSet<i64>>,
}

impl Caches {
    pub fn auth_key(&self, id: i64) -> Option<CachedKey> {
        let keys = self.auth_keys.lock().ok()?;
        let (key, at) = keys.get(&id)?;
        (at.elapsed() < AUTH_KEY_TTL).then(|| key.clone())
    }

    pub fn put_auth_key(&self, id: i64, key: CachedKey) {
        if let Ok(mut keys) = self.auth_keys.lock() {
            if keys.len() >= MAX_ENTRIES {
                keys.retain(|_, (_, at)| at.elapsed() < AUTH_KEY_TTL);
                if keys.len() >= MAX_ENTRIES {
                    keys.clear();
                }
            }
            keys.insert(id, (key, Instant::now()));
        }
    }

    /// The key's binding changed (sign-in, sign-out, reset): read it from Postgres next time.
    pub fn forget_auth_key(&self, id: i64) {
        if let Ok(mut keys) = self.auth_keys.lock() {
            keys.remove(&id);
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
