//! The per-user send limit (30 a minute by default, then FLOOD_WAIT_X). The window's counter
//! lives in Redis so every gateway instance shares it; when Redis fails, each instance falls
//! back to its own counter for the same window (degraded, not refused): sending goes on,
//! limited per instance instead of globally.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{SystemTime, UNIX_EPOCH},
};

use oxigram_routes::RedisHandle;

const WINDOW_SECS: u64 = 60;

pub struct SendLimiter {
    redis: RedisHandle,
    prefix: String,
    per_window: u32,
    local: Mutex<(u64, HashMap<i64, u32>)>,
}

impl SendLimiter {
    pub fn new(redis: RedisHandle, prefix: &str, per_window: u32) -> Self {
        Self {
            redis,
            prefix: prefix.to_owned(),
            per_window,
            local: Mutex::new((0, HashMap::new())),
        }
    }

    /// `Ok` when `user_id` may send now, or the seconds to wait.
    pub async fn check(&self, user_id: i64) -> Result<(), u32> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let window = now / WINDOW_SECS;
        let wait = (WINDOW_SECS - now % WINDOW_SECS) as u32;
        let count = match self.count_in_redis(user_id, window).await {
            Ok(count) => count,
            Err(err) => {
                tracing::warn!(error = %err, "rate limit falls back to this instance's counter");
                self.count_locally(user_id, window)
            }
        };
        if count > self.per_window as u64 {
            Err(wait.max(1))
        } else {
            Ok(())
        }
    }

    async fn count_in_redis(&self, user_id: i64, window: u64) -> redis::RedisResult<u64> {
        let key = format!("{}ratelimit:send:{user_id}:{window}", self.prefix);
        let mut conn = self.redis.connection();
        let (count,): (u64,) = redis::pipe()
            .atomic()
            .incr(&key, 1)
            .expire(&key, (WINDOW_SECS * 2) as i64)
            .ignore()
            .query_async(&mut conn)
            .await?;
        Ok(count)
    }

    fn count_locally(&self, user_id: i64, window: u64) -> u64 {
        let Ok(mut local) = self.local.lock() else {
            return 0;
        };
        if local.0 != window {
            *local = (window, HashMap::new());
        }
        let count = local.1.entry(user_id).or_insert(0);
        *count += 1;
        *count as u64
    }
}
