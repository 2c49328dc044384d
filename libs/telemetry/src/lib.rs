//! Tracing, OpenTelemetry and Prometheus metrics for every oxigram process.
//!
//! `init` installs JSON (or text) logs, an OpenTelemetry layer (exported over OTLP when an
//! endpoint is configured) and the W3C trace-context propagator. `propagation` carries the
//! trace across every gRPC hop; `metrics` holds the process-wide registry and its endpoint.

pub mod metrics;
pub mod propagation;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::{Resource, propagation::TraceContextPropagator, trace::SdkTracerProvider};
use serde::{Deserialize, Serialize};
use tracing_subscriber::{EnvFilter, layer::SubscriberExt, util::SubscriberInitExt};

/// How a process logs and exports traces.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct TelemetryConfig {
    /// `json` (default) or `text`.
    pub log_format: String,
    /// An `EnvFilter` directive; `RUST_LOG` wins when set.
    pub log_filter: String,
    /// OTLP/gRPC collector endpoint, e.g. `http://otel-collector:4317`; empty = no export.
    pub otlp_endpoint: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            log_format: "json".into(),
            log_filter: "info,sqlx=warn".into(),
            otlp_endpoint: String::new(),
        }
    }
}

/// Keeps the tracer provider alive; flushes spans when dropped.
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = &self.provider {
            let _ = provider.force_flush();
            let _ = provider.shutdown();
        }
    }
}

/// Installs logging and tracing for the process; `service_name` names the OTel resource.
/// Spans are recorded and trace context propagated only when an OTLP endpoint is configured:
/// recording spans nobody exports costs CPU on every call.
pub fn init(service_name: &str, config: &TelemetryConfig) -> anyhow::Result<TelemetryGuard> {
    if config.otlp_endpoint.is_empty() {
        return install(service_name, config, None);
    }
    let resource = Resource::builder()
        .with_service_name(service_name.to_owned())
        .build();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(config.otlp_endpoint.clone())
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_batch_exporter(exporter)
        .build();
    install(service_name, config, Some(provider))
}

/// Like [`init`], with a tracer provider made by the caller (tests use an in-memory exporter).
pub fn init_with_provider(
    service_name: &str,
    config: &TelemetryConfig,
    provider: SdkTracerProvider,
) -> anyhow::Result<TelemetryGuard> {
    install(service_name, config, Some(provider))
}

fn install(
    service_name: &str,
    config: &TelemetryConfig,
    provider: Option<SdkTracerProvider>,
) -> anyhow::Result<TelemetryGuard> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let otel = provider.as_ref().map(|provider| {
        opentelemetry::global::set_tracer_provider(provider.clone());
        tracing_opentelemetry::layer().with_tracer(provider.tracer(service_name.to_owned()))
    });
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&config.log_filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter).with(otel);
    let installed = if config.log_format == "text" {
        registry
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .try_init()
    } else {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(std::io::stderr),
            )
            .try_init()
    };
    installed.map_err(|e| anyhow::anyhow!("a global tracing subscriber is already set: {e}"))?;
    Ok(TelemetryGuard { provider })
}
