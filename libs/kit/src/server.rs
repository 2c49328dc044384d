//! The gRPC server of one service: its routes plus health and reflection, the tracing layer
//! that continues callers' traces, and graceful shutdown. Health starts NOT_SERVING; the
//! service flips it with [`Readiness`] once its migrations ran and its dependencies answer.

use std::net::SocketAddr;

use oxigram_telemetry::propagation::GrpcMakeSpan;
use tokio_util::sync::CancellationToken;
use tonic::{service::Routes, transport::Server};
use tonic_health::{
    ServingStatus,
    pb::health_server::HealthServer,
    server::{HealthReporter, HealthService},
};
use tower_http::trace::TraceLayer;

/// Flips a service's health between NOT_SERVING and SERVING.
#[derive(Clone)]
pub struct Readiness {
    reporter: HealthReporter,
}

impl Readiness {
    pub async fn serving(&self) {
        self.reporter
            .set_service_status("", ServingStatus::Serving)
            .await;
    }

    pub async fn not_serving(&self) {
        self.reporter
            .set_service_status("", ServingStatus::NotServing)
            .await;
    }
}

/// One service's gRPC server, bound but not yet serving.
pub struct GrpcServer {
    name: &'static str,
    listener: tokio::net::TcpListener,
    health: HealthServer<HealthService>,
    readiness: Readiness,
}

impl GrpcServer {
    /// Binds `addr` now, so a taken port fails at start-up rather than later.
    pub async fn bind(name: &'static str, addr: SocketAddr) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("{name}: cannot listen on {addr}: {e}"))?;
        let reporter = HealthReporter::new();
        let health = HealthServer::new(HealthService::from_health_reporter(reporter.clone()));
        let readiness = Readiness { reporter };
        readiness.not_serving().await;
        Ok(Self {
            name,
            listener,
            health,
            readiness,
        })
    }

    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// Serves `routes` until `shutdown` is cancelled, then drains in-flight calls.
    /// Boxed so that callers' futures stay provably `Send`.
    pub fn serve(
        self,
        routes: Routes,
        shutdown: CancellationToken,
    ) -> futures::future::BoxFuture<'static, anyhow::Result<()>> {
        Box::pin(self.serve_inner(routes, shutdown))
    }

    async fn serve_inner(self, routes: Routes, shutdown: CancellationToken) -> anyhow::Result<()> {
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(oxigram_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()?;
        let addr = self.listener.local_addr()?;
        tracing::info!(service = self.name, %addr, "gRPC server listening");
        // No Nagle: a reply split over segments must not wait for the peer's delayed ACK.
        let incoming =
            tonic::transport::server::TcpIncoming::from(self.listener).with_nodelay(Some(true));
        let readiness = self.readiness.clone();
        let stop = async move {
            shutdown.cancelled().await;
            readiness.not_serving().await;
        };
        Server::builder()
            .layer(TraceLayer::new_for_grpc().make_span_with(GrpcMakeSpan { service: self.name }))
            .add_routes(routes)
            .add_service(self.health)
            .add_service(reflection)
            .serve_with_incoming_shutdown(incoming, stop)
            .await?;
        tracing::info!(service = self.name, "gRPC server stopped");
        Ok(())
    }
}
