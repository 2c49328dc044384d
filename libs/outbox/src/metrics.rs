//! Outbox metrics, shared by every outbox in the process and labelled by schema and destination.

use std::sync::OnceLock;

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::{counter::Counter, family::Family, gauge::Gauge};

type Labels = Vec<(&'static str, String)>;

struct OutboxMetrics {
    delivered: Family<Labels, Counter>,
    retried: Family<Labels, Counter>,
    failed: Family<Labels, Counter>,
    oldest_pending: Family<Labels, Gauge<f64, AtomicU64>>,
    failed_rows: Family<Labels, Gauge>,
    pending_rows: Family<Labels, Gauge>,
}

fn get() -> &'static OutboxMetrics {
    static METRICS: OnceLock<OutboxMetrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let m = OutboxMetrics {
            delivered: Family::default(),
            retried: Family::default(),
            failed: Family::default(),
            oldest_pending: Family::default(),
            failed_rows: Family::default(),
            pending_rows: Family::default(),
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
            "Outbox events whose rows were refused as malformed until out of attempts (terminal failures)",
            m.failed.clone(),
        );
        oxigram_telemetry::metrics::register(
            "outbox_oldest_pending_seconds",
            "Age of the oldest row still waiting for delivery (0 when none): a fact promised to a client and not yet handed on",
            m.oldest_pending.clone(),
        );
        oxigram_telemetry::metrics::register(
            "outbox_failed_rows",
            "Rows kept as failed, waiting for an operator",
            m.failed_rows.clone(),
        );
        oxigram_telemetry::metrics::register(
            "outbox_pending_rows",
            "Rows waiting for delivery: facts promised to clients and not yet handed on",
            m.pending_rows.clone(),
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

pub(crate) fn backlog(
    schema: &str,
    destination: &str,
    oldest_pending_secs: f64,
    failed_rows: i64,
    pending_rows: i64,
) {
    let l = labels(schema, destination);
    get()
        .oldest_pending
        .get_or_create(&l)
        .set(oldest_pending_secs);
    get().failed_rows.get_or_create(&l).set(failed_rows);
    get().pending_rows.get_or_create(&l).set(pending_rows);
}
