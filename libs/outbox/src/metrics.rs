//! Outbox metrics, shared by every outbox in the process and labelled by schema and destination.

use std::sync::OnceLock;

use prometheus_client::metrics::{counter::Counter, family::Family};

type Labels = Vec<(&'static str, String)>;

struct OutboxMetrics {
    delivered: Family<Labels, Counter>,
    retried: Family<Labels, Counter>,
    failed: Family<Labels, Counter>,
}

fn get() -> &'static OutboxMetrics {
    static METRICS: OnceLock<OutboxMetrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let m = OutboxMetrics {
            delivered: Family::default(),
            retried: Family::default(),
            failed: Family::default(),
        };
        oxigram_telemetry::metrics::register(
            "outbox_delivered",
            "Outbox events delivered, by path (fast_path or relay)",
            m.delivered.clone(),
        );
        oxigram_telemetry::metrics::register(
            "outbox_retried",
            "Outbox events whose delivery failed and will be retried",
            m.retried.clone(),
        );
        oxigram_telemetry::metrics::register(
            "outbox_failed",
            "Outbox events whose rows ran out of attempts (terminal failures)",
            m.failed.clone(),
        );
        m
    })
}

fn labels(schema: &str, destination: &str) -> Labels {
    vec![
        ("schema", schema.to_owned()),
        ("destination", destination.to_owned()),
    ]
}

pub(crate) fn delivered(schema: &str, destination: &str, path: &'static str, n: u64) {
    let mut l = labels(schema, destination);
    l.push(("path", path.to_owned()));
    get().delivered.get_or_create(&l).inc_by(n);
}

pub(crate) fn retried(schema: &str, destination: &str, n: u64) {
    get()
        .retried
        .get_or_create(&labels(schema, destination))
        .inc_by(n);
}

pub(crate) fn failed(schema: &str, destination: &str, n: u64) {
    get()
        .failed
        .get_or_create(&labels(schema, destination))
        .inc_by(n);
}
