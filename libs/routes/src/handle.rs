//! The one way a service talks to Redis: a shared connection, a time budget on every call and
//! a circuit breaker. Redis holds only what can be rebuilt, so no request is worth holding up
//! for it: a call that outlasts its budget fails (and its caller goes on without Redis), and
//! after a run of failures the breaker opens: calls then fail at once without touching Redis,
//! while one background task probes it and closes the breaker at its first answer.

use std::{
    future::Future,
    io,
    sync::{
        Arc, OnceLock, Weak,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    time::Duration,
};

use oxigram_kit::config::RedisConfig;
use prometheus_client::metrics::{family::Family, gauge::Gauge};
use redis::{RedisError, aio::ConnectionManager};

/// How long a service waits on Redis, and when it stops asking.
#[derive(Debug, Clone, Copy)]
pub struct RedisBudget {
    /// Longest one call may take, connecting included.
    pub call_timeout: Duration,
    /// Failed calls in a row that open the breaker.
    pub breaker_failures: u32,
    /// How often an open breaker probes.
    pub probe_every: Duration,
}

impl From<&RedisConfig> for RedisBudget {
    fn from(config: &RedisConfig) -> Self {
        Self {
            call_timeout: Duration::from_millis(config.call_timeout_ms.max(1)),
            breaker_failures: config.breaker_failures.max(1),
            probe_every: Duration::from_millis(config.breaker_probe_ms.max(1)),
        }
    }
}

impl Default for RedisBudget {
    fn default() -> Self {
        Self::from(&RedisConfig::default())
    }
}

/// A Redis connection made on first use and re-made after failures. No lock guards it:
/// callers share one multiplexed connection, and a caller that finds it broken starts its
/// replacement without making the others wait behind a connect.
#[derive(Clone)]
pub struct RedisHandle {
    inner: Arc<Inner>,
}

struct Inner {
    conn: ConnectionManager,
    budget: RedisBudget,
    /// The service this handle serves, the label of its breaker gauge.
    service: String,
    failures_in_a_row: AtomicU32,
    open: AtomicBool,
}

impl RedisHandle {
    /// Connects on first use, with the budget of `config.redis`. Must be called inside a
    /// Tokio runtime.
    pub fn new(url: &str, budget: RedisBudget, service: &str) -> redis::RedisResult<Self> {
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(budget.call_timeout))
            .set_response_timeout(Some(budget.call_timeout))
            .set_number_of_retries(1);
        let conn = ConnectionManager::new_lazy_with_config(redis::Client::open(url)?, config)?;
        breaker_gauge(service).set(0);
        Ok(Self {
            inner: Arc::new(Inner {
                conn,
                budget,
                service: service.to_owned(),
                failures_in_a_row: AtomicU32::new(0),
                open: AtomicBool::new(false),
            }),
        })
    }

    /// Whether the breaker is open: calls fail at once until a probe gets an answer.
    pub fn breaker_open(&self) -> bool {
        self.inner.open.load(Ordering::Relaxed)
    }

    /// Runs `call` on the shared connection within the budget, unless the breaker is open.
    /// A failure to reach Redis (refused, dropped, over budget) counts towards opening the
    /// breaker; an answer, even an error reply, closes the run of failures.
    pub async fn call<T, F, Fut>(&self, call: F) -> redis::RedisResult<T>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        if self.breaker_open() {
            return Err(RedisError::from(io::Error::new(
                io::ErrorKind::NotConnected,
                "Redis circuit breaker open",
            )));
        }
        let answer = tokio::time::timeout(
            self.inner.budget.call_timeout,
            call(self.inner.conn.clone()),
        )
        .await
        .unwrap_or_else(|_| {
            Err(RedisError::from(io::Error::new(
                io::ErrorKind::TimedOut,
                "Redis call over its time budget",
            )))
        });
        match &answer {
            Err(err) if unreachable(err) => self.failed(),
            _ => self.inner.failures_in_a_row.store(0, Ordering::Relaxed),
        }
        answer
    }

    /// Runs `pipe`, and once more when the connection it found had dropped (Redis restarted
    /// since the last call): the first call after a restart fails on the old socket and only
    /// then starts the new one, and the table's readers and writers are idempotent. A refused
    /// connection (Redis still down) or a timeout is not retried. Both tries share one budget.
    pub async fn query<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<T> {
        self.call(|mut conn| async move {
            match pipe.query_async(&mut conn).await {
                Err(err) if err.is_connection_dropped() && !err.is_connection_refusal() => {
                    pipe.query_async(&mut conn).await
                }
                answer => answer,
            }
        })
        .await
    }

    /// Runs a Lua script within the budget.
    pub async fn invoke<T: redis::FromRedisValue>(
        &self,
        script: &redis::ScriptInvocation<'_>,
    ) -> redis::RedisResult<T> {
        self.call(|mut conn| async move { script.invoke_async(&mut conn).await })
            .await
    }

    fn failed(&self) {
        let failures = self.inner.failures_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
        if failures < self.inner.budget.breaker_failures
            || self.inner.open.swap(true, Ordering::Relaxed)
        {
            return;
        }
        tracing::warn!(
            service = %self.inner.service,
            failures,
            "Redis keeps failing: circuit breaker open, calls go on without Redis until a probe answers"
        );
        breaker_gauge(&self.inner.service).set(1);
        tokio::spawn(probe(Arc::downgrade(&self.inner)));
    }
}

/// Whether `err` says Redis could not be reached in time, rather than answering.
fn unreachable(err: &RedisError) -> bool {
    err.is_io_error() || err.is_timeout() || err.is_connection_dropped()
}

/// PINGs Redis every probe period until it answers within the budget, then closes the
/// breaker. Ends early when every handle is gone.
async fn probe(inner: Weak<Inner>) {
    loop {
        let Some(period) = inner.upgrade().map(|i| i.budget.probe_every) else {
            return;
        };
        tokio::time::sleep(period).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let mut conn = inner.conn.clone();
        let cmd = redis::cmd("PING");
        let ping = cmd.query_async::<String>(&mut conn);
        if let Ok(Ok(_)) = tokio::time::timeout(inner.budget.call_timeout, ping).await {
            inner.failures_in_a_row.store(0, Ordering::Relaxed);
            inner.open.store(false, Ordering::Relaxed);
            breaker_gauge(&inner.service).set(0);
            tracing::info!(service = %inner.service, "Redis answers again: circuit breaker closed");
            return;
        }
    }
}

type Labels = Vec<(&'static str, String)>;

/// `oxigram_redis_breaker_open{service}`: 1 while the service's breaker is open.
fn breaker_gauge(service: &str) -> Gauge {
    static GAUGE: OnceLock<Family<Labels, Gauge>> = OnceLock::new();
    GAUGE
        .get_or_init(|| {
            let family = Family::<Labels, Gauge>::default();
            oxigram_telemetry::metrics::register(
                "redis_breaker_open",
                "1 while the service's Redis circuit breaker is open (calls go on without Redis)",
                family.clone(),
            );
            family
        })
        .get_or_create(&vec![("service", service.to_owned())])
        .clone()
}
