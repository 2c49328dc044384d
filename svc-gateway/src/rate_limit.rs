//! Per-user limits per fixed minute window, then FLOOD_WAIT_X: sends (30 a minute by
//! default), and lookups of other users (resolving a phone or a username, and each phone of a
//! contact import), which would otherwise let one account enumerate who uses the service.
//! The window's counter lives in Redis so every gateway instance shares it; when Redis
//! fails, each instance falls back to its own counter for the same window (degraded, not
//! refused): the calls go on, limited per instance instead of globally.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{SystemTime, UNIX_EPOCH},
};

use oxigram_routes::RedisHandle;

const WINDOW_SECS: u64 = 60;

/// One limit: `per_window` units a user may spend per window.
pub struct Limiter {
    redis: RedisHandle,
    /// The limit's name (`send`, `lookup`), its metrics' `rule`.
    rule: String,
    /// The Redis key prefix of this limit's counters.
    prefix: String,
    per_window: u32,
    local: Mutex<(u64, HashMap<i64, u32>)>,
}

impl Limiter {
    /// A limit named `name` (`send`, `lookup`) among the counters under `prefix`.
    pub fn new(redis: RedisHandle, prefix: &str, name: &str, per_window: u32) -> Self {
        Self {
            redis,
            rule: name.to_owned(),
            prefix: format!("{prefix}ratelimit:{name}:"),
            per_window,
            local: Mutex::new((0, HashMap::new())),
        }
    }

    /// `Ok` when `user_id` may make one more call now, or the seconds to wait.
    pub async fn check(&self, user_id: i64) -> Result<(), u32> {
        self.spend(user_id, 1).await
    }

    /// `Ok` when `user_id` may spend `units` more now (counted either way), or the seconds
    /// to wait.
    pub async fn spend(&self, user_id: i64, units: u32) -> Result<(), u32> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let window = now / WINDOW_SECS;
        let wait = (WINDOW_SECS - now % WINDOW_SECS) as u32;
        let (count, decided) = match self.count_in_redis(user_id, window, units).await {
            Ok(count) => (count, "redis"),
            Err(err) => {
                tracing::debug!(error = %err, "rate limit falls back to this instance's counter");
                (self.count_locally(user_id, window, units), "degraded")
            }
        };
        crate::metrics::rate_limit_degraded(decided == "degraded");
        let refused = count > self.per_window as u64;
        crate::metrics::rate_limit_check(&self.rule, decided, refused);
        if refused { Err(wait.max(1)) } else { Ok(()) }
    }

    async fn count_in_redis(
        &self,
        user_id: i64,
        window: u64,
        units: u32,
    ) -> redis::RedisResult<u64> {
        let key = format!("{}{user_id}:{window}", self.prefix);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .incr(&key, units)
            .expire(&key, (WINDOW_SECS * 2) as i64)
            .ignore();
        let (count,): (u64,) = self.redis.query(&pipe).await?;
        Ok(count)
    }

    fn count_locally(&self, user_id: i64, window: u64, units: u32) -> u64 {
        let Ok(mut local) = self.local.lock() else {
            return 0;
        };
        if local.0 != window {
            *local = (window, HashMap::new());
        }
        let count = local.1.entry(user_id).or_insert(0);
        *count = count.saturating_add(units);
        *count as u64
    }
}
