//! The process-wide Prometheus registry and the `/metrics` HTTP endpoint that serves it.

use std::{
    net::SocketAddr,
    sync::{Mutex, OnceLock},
};

use prometheus_client::{encoding::text::encode, registry::Registry};

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(Registry::with_prefix("oxigram")))
}

/// Registers a metric once for the whole process.
pub fn register(name: &str, help: &str, metric: impl prometheus_client::registry::Metric) {
    if let Ok(mut registry) = registry().lock() {
        registry.register(name, help, metric);
    }
}

/// The current metrics in the Prometheus text format.
pub fn render() -> String {
    let mut out = String::new();
    if let Ok(registry) = registry().lock() {
        let _ = encode(&mut out, &registry);
    }
    out
}

/// Serves `GET /metrics` until `shutdown` completes.
pub async fn serve(
    addr: SocketAddr,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(|| async {
            (
                [(
                    http::header::CONTENT_TYPE,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                )],
                render(),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "metrics endpoint listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
