//! The limiter's metrics: checks by rule and by what decided them, refusals by rule, and
//! whether the service is in degraded mode.

use std::sync::OnceLock;

use prometheus_client::metrics::{counter::Counter, family::Family, gauge::Gauge};

type Labels = Vec<(&'static str, String)>;

struct LimiterMetrics {
    checks: Family<Labels, Counter>,
    limited: Family<Labels, Counter>,
    degraded: Family<Labels, Gauge>,
}

fn get() -> &'static LimiterMetrics {
    static METRICS: OnceLock<LimiterMetrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let m = LimiterMetrics {
            checks: Family::default(),
            limited: Family::default(),
            degraded: Family::default(),
        };
        oxigram_telemetry::metrics::register(
            "rate_limit_checks",
            "Rate-limit checks, by rule and by what decided them: local (this instance: a key it saw over the limit, a refusal of the shared bucket still standing, or units it leased), redis (the shared bucket) or degraded (this instance's share while Redis fails)",
            m.checks.clone(),
        );
        oxigram_telemetry::metrics::register(
            "rate_limited",
            "Calls refused with FLOOD_WAIT_X, by rule",
            m.limited.clone(),
        );
        oxigram_telemetry::metrics::register(
            "rate_limit_degraded",
            "1 while the service's limits are decided per instance because Redis fails",
            m.degraded.clone(),
        );
        m
    })
}

pub(crate) fn check(rule: &str, decided: &'static str, refused: bool) {
    let m = get();
    m.checks
        .get_or_create(&vec![
            ("rule", rule.to_owned()),
            ("decided", decided.to_owned()),
        ])
        .inc();
    if refused {
        m.limited
            .get_or_create(&vec![("rule", rule.to_owned())])
            .inc();
    }
}

pub(crate) fn degraded(service: &str, degraded: bool) {
    get()
        .degraded
        .get_or_create(&vec![("service", service.to_owned())])
        .set(i64::from(degraded));
}
