//! The gRPC server of one service: its routes plus health and reflection, the tracing layer
//! that continues callers' traces, and graceful shutdown. While it serves, callers in the
//! same process reach its routes in-process ([`crate::local`]). Health starts NOT_SERVING; the
//! service flips it with [`Readiness`] once its migrations ran and its dependencies answer.

use oxigram_telemetry::propagation::GrpcMakeSpan;
use tokio_util::sync::CancellationToken;
use tonic::{body::Body, service::Routes, transport::Server};
use tonic_health::{
    ServingStatus,
    pb::health_server::HealthServer,
    server::{HealthReporter, HealthService},
};
use tower::{BoxError, ServiceBuilder, ServiceExt, util::BoxCloneSyncService};
use tower_http::trace::TraceLayer;

use crate::{ServiceAddr, local};

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
    /// How clients name it: calls from this process to it stay in-process.
    endpoint: String,
    listener: tokio::net::TcpListener,
    health: HealthServer<HealthService>,
    readiness: Readiness,
}

impl GrpcServer {
    /// Binds the service's listen address now, so a taken port fails at start-up rather
    /// than later.
    pub async fn bind(name: &'static str, me: &ServiceAddr) -> anyhow::Result<Self> {
        let addr = me.listen;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("{name}: cannot listen on {addr}: {e}"))?;
        let reporter = HealthReporter::new();
        let health = HealthServer::new(HealthService::from_health_reporter(reporter.clone()));
        let readiness = Readiness { reporter };
        readiness.not_serving().await;
        Ok(Self {
            name,
            endpoint: me.endpoint.clone(),
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
        let trace = TraceLayer::new_for_grpc().make_span_with(GrpcMakeSpan { service: self.name });
        let traced = ServiceBuilder::new()
            .layer(trace.clone())
            .service(routes.clone().add_service(self.health.clone()));
        let answered =
            ServiceExt::<http::Request<Body>>::map_response(traced, |answer| answer.map(Body::new));
        let in_process = ServiceExt::<http::Request<Body>>::map_err(answered, BoxError::from);
        let _registration = local::register(&self.endpoint, BoxCloneSyncService::new(in_process));
        let readiness = self.readiness.clone();
        let stop = async move {
            shutdown.cancelled().await;
            readiness.not_serving().await;
        };
        Server::builder()
            .layer(trace)
            .add_routes(routes)
            .add_service(self.health)
            .add_service(reflection)
            .serve_with_incoming_shutdown(incoming, stop)
            .await?;
        tracing::info!(service = self.name, "gRPC server stopped");
        Ok(())
    }
}
