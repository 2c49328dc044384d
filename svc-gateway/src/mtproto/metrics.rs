//! What the MTProto door counts for operators: API calls by method and result and their
//! latency, the connections with a live feed, and the updates pushed to them.

use std::{sync::OnceLock, time::Duration};

use oxigram_mtproto::session::RpcError;
use prometheus_client::metrics::{
    counter::Counter,
    family::Family,
    gauge::Gauge,
    histogram::{Histogram, exponential_buckets},
};

type Labels = Vec<(&'static str, String)>;

struct DoorMetrics {
    calls: Family<Labels, Counter>,
    call_duration: Histogram,
    feeds_open: Gauge,
    pushes: Counter,
}

fn get() -> &'static DoorMetrics {
    static METRICS: OnceLock<DoorMetrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let m = DoorMetrics {
            calls: Family::default(),
            // 1 ms to about 33 s.
            call_duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            feeds_open: Gauge::default(),
            pushes: Counter::default(),
        };
        oxigram_telemetry::metrics::register(
            "mtproto_calls",
            "API calls on the MTProto door, by TL method and result: ok or the rpc_error name",
            m.calls.clone(),
        );
        oxigram_telemetry::metrics::register(
            "mtproto_call_duration_seconds",
            "Time an MTProto API call took at the door, whatever its result",
            m.call_duration.clone(),
        );
        oxigram_telemetry::metrics::register(
            "mtproto_feeds_open",
            "MTProto connections of this gateway instance that get live updates",
            m.feeds_open.clone(),
        );
        oxigram_telemetry::metrics::register(
            "mtproto_pushes",
            "Updates pushed to MTProto connections",
            m.pushes.clone(),
        );
        m
    })
}

/// A call of TL method `id` answered `answer` after `took`.
pub fn call<T>(id: Option<u32>, answer: &Result<T, RpcError>, took: Duration) {
    // A name of the schema (or "(unknown)"): the series are as many as the schema's methods.
    let method = id.map_or("(unknown)", oxigram_tl::name_for_id).to_owned();
    let result = match answer {
        Ok(_) => "ok".to_owned(),
        // One series for every wait, not one per number of seconds.
        Err(e) if e.message.starts_with("FLOOD_WAIT_") => "FLOOD_WAIT_X".to_owned(),
        Err(e) => e.message.clone(),
    };
    let m = get();
    m.calls
        .get_or_create(&vec![("method", method), ("result", result)])
        .inc();
    m.call_duration.observe(took.as_secs_f64());
}

/// A connection's feed started; the guard counts it until dropped.
pub fn feed_opened() -> FeedOpen {
    get().feeds_open.inc();
    FeedOpen
}

pub struct FeedOpen;

impl Drop for FeedOpen {
    fn drop(&mut self) {
        get().feeds_open.dec();
    }
}

/// An update was pushed to a connection.
pub fn pushed() {
    get().pushes.inc();
}
