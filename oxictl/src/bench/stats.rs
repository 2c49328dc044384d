//! Bounded calls, error counts by stable code, and percentiles.

use super::*;

pub(super) fn req<T>(message: T) -> Request<T> {
    let mut r = Request::new(message);
    r.set_timeout(RPC_DEADLINE);
    r
}

/// The stable error code of a status, or its gRPC code when it carries none.
pub(super) fn error_code(s: &Status) -> String {
    oxigram_errors::code_of(s).unwrap_or_else(|| format!("GRPC_{:?}", s.code()))
}

/// A unary call bounded by the deadline; the error is a stable code (or TIMEOUT).
pub(super) async fn unary<T>(
    call: impl Future<Output = Result<tonic::Response<T>, Status>>,
) -> Result<T, String> {
    match tokio::time::timeout(RPC_DEADLINE, call).await {
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(s)) => Err(error_code(&s)),
        Err(_) => Err("TIMEOUT".into()),
    }
}

#[derive(Default, Debug)]
pub(super) struct Errors(pub(super) BTreeMap<String, u64>);

impl Errors {
    pub(super) fn add(&mut self, phase: &str, code: &str) {
        *self.0.entry(format!("{phase}:{code}")).or_default() += 1;
    }
    pub(super) fn merge(&mut self, other: Errors) {
        for (k, v) in other.0 {
            *self.0.entry(k).or_default() += v;
        }
    }
    pub(super) fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

/// Nearest-rank percentile of sorted microsecond samples, in milliseconds.
pub(super) fn pct_ms(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let idx = rank.clamp(1, sorted.len()) - 1;
    Some(round3(sorted[idx] as f64 / 1000.0))
}

pub(super) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub(super) fn num(x: Option<f64>) -> Value {
    x.map_or(Value::Null, |v| json!(v))
}

pub(super) fn fmt_ms(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |v| format!("{v:.1} ms"))
}
