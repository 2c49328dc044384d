//! Error counts by phase and stable code, and percentiles.

use super::*;

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
