//! What the gateway counts for operators: sends by result and their latency, open update
//! streams, pushes offered to streams, and the size of getDifference answers (the rate
//! limiter's are `oxigram_limiter`'s).

use std::{sync::OnceLock, time::Duration};

use prometheus_client::metrics::{
    counter::Counter,
    family::Family,
    gauge::Gauge,
    histogram::{Histogram, exponential_buckets},
};
use tonic::Status;

type Labels = Vec<(&'static str, String)>;

struct GatewayMetrics {
    sends: Family<Labels, Counter>,
    send_duration: Histogram,
    streams_open: Gauge,
    pushes: Family<Labels, Counter>,
    difference_updates: Histogram,
    catch_up_paced: Counter,
    catch_up_line: Gauge,
}

fn get() -> &'static GatewayMetrics {
    static METRICS: OnceLock<GatewayMetrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let m = GatewayMetrics {
            sends: Family::default(),
            // 1 ms to about 33 s.
            send_duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            streams_open: Gauge::default(),
            pushes: Family::default(),
            // 1 to 4096 updates.
            difference_updates: Histogram::new(exponential_buckets(1.0, 2.0, 13)),
            catch_up_paced: Counter::default(),
            catch_up_line: Gauge::default(),
        };
        oxigram_telemetry::metrics::register(
            "sends",
            "SendMessage calls, by result: ok or the stable error code answered",
            m.sends.clone(),
        );
        oxigram_telemetry::metrics::register(
            "send_duration_seconds",
            "Time a SendMessage call took at the gateway, whatever its result",
            m.send_duration.clone(),
        );
        oxigram_telemetry::metrics::register(
            "streams_open",
            "Update streams open on this gateway instance",
            m.streams_open.clone(),
        );
        oxigram_telemetry::metrics::register(
            "pushes",
            "Logged updates offered to this instance's streams, by result: delivered, lagged (the stream was full and is dropped) or closed",
            m.pushes.clone(),
        );
        oxigram_telemetry::metrics::register(
            "difference_updates",
            "Updates per getDifference answer (new messages and other updates)",
            m.difference_updates.clone(),
        );
        oxigram_telemetry::metrics::register(
            "catch_up_paced",
            "Catch-ups (resumed streams' replays, GetDifference calls) turned away with a wait because this instance ran as many as it takes at once",
            m.catch_up_paced.clone(),
        );
        oxigram_telemetry::metrics::register(
            "catch_up_line",
            "Catch-ups waiting in line for a slot on this instance (resumed streams, GetDifference calls)",
            m.catch_up_line.clone(),
        );
        m
    })
}

/// A SendMessage answered `answer` after `took`.
pub fn send<T>(answer: &Result<T, Status>, took: Duration) {
    let result = match answer {
        Ok(_) => "ok".to_owned(),
        Err(status) => match oxigram_errors::code_of(status) {
            // One series for every wait, not one per number of seconds.
            Some(code) if code.starts_with("FLOOD_WAIT_") => "FLOOD_WAIT_X".to_owned(),
            Some(code) => code,
            None => "UNCODED".to_owned(),
        },
    };
    let m = get();
    m.sends.get_or_create(&vec![("result", result)]).inc();
    m.send_duration.observe(took.as_secs_f64());
}

/// An update stream opened; the returned guard counts it until dropped.
pub fn stream_opened() -> StreamOpen {
    get().streams_open.inc();
    StreamOpen
}

/// One open update stream, counted in `oxigram_streams_open` while it lives.
pub struct StreamOpen;

impl Drop for StreamOpen {
    fn drop(&mut self) {
        get().streams_open.dec();
    }
}

/// `n` pushes to streams ended as `result` (`delivered`, `lagged`, `closed`).
pub fn pushes(result: &'static str, n: u64) {
    if n > 0 {
        get()
            .pushes
            .get_or_create(&vec![("result", result.to_owned())])
            .inc_by(n);
    }
}

/// A getDifference answer carried `updates` updates.
pub fn difference(updates: usize) {
    get().difference_updates.observe(updates as f64);
}

/// A catch-up was turned away with a wait.
pub fn catch_up_paced() {
    get().catch_up_paced.inc();
}

/// A catch-up joined (+1) or left (-1) the line for a slot.
pub fn catch_up_line(change: i64) {
    get().catch_up_line.inc_by(change);
}
