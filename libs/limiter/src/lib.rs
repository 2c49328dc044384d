//! A distributed rate limiter. Each rule is `limit` units per `period` per key (a user, a
//! phone, an auth key), decided by GCRA ([`gcra`]) in three places, cheapest first:
//! - this instance (`decided = local`), with no Redis round trip: a key it alone already saw
//!   over the limit is refused, a refusal of the shared bucket stands until the time it named,
//!   and units it leased from the shared bucket ahead of need are granted ([`lease`]);
//! - otherwise the shared bucket in Redis, one Lua script on Redis' clock (`redis`), which
//!   spends the check's units and, while they fit, a lease of a tenth of this instance's
//!   share, so most checks of a busy key are decided locally;
//! - while Redis fails (error, over its budget, breaker open), this instance's share of the
//!   limit, `ceil(limit / live instances)` with the instance count it last knew (`degraded`):
//!   calls go on, limited about as much in total. The switch into and out of degraded mode is
//!   one log line and `oxigram_rate_limit_degraded{service}`, not one per check.
//!
//! Instances count themselves in a Redis sorted set, each refreshing its own member a few
//! times a minute.

mod gcra;
mod lease;
mod metrics;

use std::{
    sync::{
        Arc, LazyLock, Mutex, Weak,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use oxigram_routes::RedisHandle;

/// How often an instance refreshes its membership and reads the count.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// An instance that did not refresh for this long no longer counts.
const INSTANCE_TTL: Duration = Duration::from_secs(20);

/// One limit: `limit` units per `period` per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The rule's name: its Redis keys and its metrics' `rule` label.
    pub name: &'static str,
    pub limit: u32,
    pub period: Duration,
}

impl Rule {
    pub const fn per_minute(name: &'static str, limit: u32) -> Self {
        Self {
            name,
            limit,
            period: Duration::from_secs(60),
        }
    }
}

/// The limits of one service's instance.
pub struct Limiter {
    inner: Arc<Inner>,
}

struct Inner {
    redis: RedisHandle,
    /// Prefix of the limiter's Redis keys.
    prefix: String,
    /// The service, its degraded gauge's label.
    service: String,
    instance: String,
    /// Live instances as last read from Redis; the expected count until then.
    instances: AtomicU32,
    degraded: AtomicBool,
    /// Per rule: what this instance let through (full limit), and its degraded share.
    local: Mutex<std::collections::HashMap<&'static str, Buckets>>,
}

#[derive(Default)]
struct Buckets {
    seen: gcra::Table,
    leases: lease::Leases,
    share: gcra::Table,
}

/// The shared bucket's script, hashed once.
static GCRA: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("gcra.lua")));

impl Limiter {
    /// A limiter whose keys live under `{prefix}limit:`, counting `expected_instances` live
    /// instances until Redis tells how many there are. Starts the instance heartbeat; must be
    /// called inside a Tokio runtime.
    pub fn new(redis: RedisHandle, prefix: &str, service: &str, expected_instances: u32) -> Self {
        let inner = Arc::new(Inner {
            redis,
            prefix: format!("{prefix}limit:"),
            service: service.to_owned(),
            instance: uuid::Uuid::new_v4().to_string(),
            instances: AtomicU32::new(expected_instances.max(1)),
            degraded: AtomicBool::new(false),
            local: Mutex::new(Default::default()),
        });
        metrics::degraded(service, false);
        tokio::spawn(heartbeat(Arc::downgrade(&inner)));
        Self { inner }
    }

    /// Live instances as last known.
    pub fn instances(&self) -> u32 {
        self.inner.instances.load(Ordering::Relaxed).max(1)
    }

    /// `Ok` when `key` may spend one unit of `rule` now, or the seconds to wait.
    pub async fn check(&self, rule: &Rule, key: &str) -> Result<(), u32> {
        self.spend(rule, key, 1).await
    }

    /// `Ok` when `key` may spend `units` of `rule` now (then spent), or the seconds to wait
    /// (nothing spent).
    pub async fn spend(&self, rule: &Rule, key: &str, units: u32) -> Result<(), u32> {
        let inner = &self.inner;
        let now = Instant::now();
        let terms = (rule.limit, rule.period);
        let here = inner.with_buckets(rule, |b| {
            if let Err(wait) = b.seen.peek(key, units, rule.limit, rule.period, now) {
                return Some(Err(wait));
            }
            let verdict = b.leases.take(key, units, terms, now)?;
            if verdict.is_ok() {
                let _ = b.seen.spend(key, units, rule.limit, rule.period, now);
            }
            Some(verdict)
        });
        if let Some(verdict) = here {
            metrics::check(rule.name, "local", verdict.is_err());
            return verdict.map_err(seconds);
        }
        let limit = rule.limit.max(1);
        let extra = lease::size(limit, self.instances());
        let redis_key = format!("{}{}:{key}", inner.prefix, rule.name);
        let mut invocation = GCRA.key(redis_key);
        invocation
            .arg(units)
            .arg(extra)
            .arg(limit)
            .arg(rule.period.as_millis() as u64);
        let (verdict, decided) = match inner.redis.invoke::<(u32, u64)>(&invocation).await {
            Ok((spent, _)) if spent >= units => {
                inner.set_degraded(false);
                let leased = spent - units;
                let earned_in = rule.period / limit * leased;
                inner.with_buckets(rule, |b| {
                    let _ = b.seen.spend(key, units, rule.limit, rule.period, now);
                    b.leases.lease(key, leased, terms, earned_in, now);
                });
                (Ok(()), "redis")
            }
            Ok((_, wait_ms)) => {
                inner.set_degraded(false);
                let wait = Duration::from_millis(wait_ms.max(1));
                inner.with_buckets(rule, |b| {
                    b.leases.refuse(key, units, terms, now + wait, now)
                });
                (Err(wait), "redis")
            }
            Err(err) => {
                tracing::debug!(error = %err, rule = rule.name, "rate limit decided on this instance's share");
                inner.set_degraded(true);
                let share = rule.limit.div_ceil(self.instances()).max(1);
                let verdict = inner
                    .with_buckets(rule, |b| b.share.spend(key, units, share, rule.period, now));
                (verdict, "degraded")
            }
        };
        metrics::check(rule.name, decided, verdict.is_err());
        verdict.map_err(seconds)
    }
}

impl Inner {
    fn with_buckets<T>(&self, rule: &Rule, f: impl FnOnce(&mut Buckets) -> T) -> T {
        match self.local.lock() {
            Ok(mut local) => f(local.entry(rule.name).or_default()),
            Err(_) => f(&mut Buckets::default()),
        }
    }

    fn set_degraded(&self, degraded: bool) {
        if self.degraded.swap(degraded, Ordering::Relaxed) == degraded {
            return;
        }
        metrics::degraded(&self.service, degraded);
        if degraded {
            tracing::warn!(
                service = %self.service,
                instances = self.instances.load(Ordering::Relaxed),
                "rate limits degraded: Redis fails, this instance enforces its share of each limit"
            );
        } else {
            tracing::info!(service = %self.service, "rate limits shared again: Redis answers");
        }
    }
}

/// A wait in whole seconds, at least one (FLOOD_WAIT_X).
fn seconds(wait: Duration) -> u32 {
    (wait.as_millis().div_ceil(1000) as u32).max(1)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// Keeps this instance in the set of live instances and reads how many there are, until the
/// limiter is dropped. A failure keeps the count last read.
async fn heartbeat(inner: Weak<Inner>) {
    loop {
        let Some(me) = inner.upgrade() else {
            return;
        };
        let key = format!("{}instances", me.prefix);
        let now = now_ms();
        let mut pipe = redis::pipe();
        pipe.zadd(&key, &me.instance, now)
            .ignore()
            .zrembyscore(&key, 0, now.saturating_sub(INSTANCE_TTL.as_millis() as u64))
            .ignore()
            .zcard(&key)
            .pexpire(&key, INSTANCE_TTL.as_millis() as i64)
            .ignore();
        if let Ok((count,)) = me.redis.query::<(u32,)>(&pipe).await {
            me.instances.store(count.max(1), Ordering::Relaxed);
        }
        drop(me);
        tokio::time::sleep(HEARTBEAT_EVERY).await;
    }
}
