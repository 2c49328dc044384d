//! The gRPC server of one service: its routes plus health and reflection, the tracing layer
//! that continues callers' traces, and graceful shutdown. While it serves, callers in the
//! same process reach its routes in-process ([`crate::local`]). Health starts NOT_SERVING; the
//! service flips it with [`Readiness`] once its migrations ran and its dependencies answer.
//! Requests of the client API that tonic refuses before any codec reads them get the same
//! stable code as a body that does not decode ([`ClientApiFramesLayer`]). Every request is
//! counted and timed by method and answered code ([`crate::rpc_metrics`]).

use std::task::{Context, Poll};

use futures::{
    TryFutureExt,
    future::{Either, MapOk},
};
use oxigram_errors::ERROR_CODE_HEADER;
use oxigram_proto::{
    codec::{CLIENT_API_PATH_PREFIX, request_invalid},
    http2,
};
use oxigram_telemetry::propagation::GrpcMakeSpan;
use tokio_util::sync::CancellationToken;
use tonic::{Code, Status, body::Body, service::Routes, transport::Server};
use tonic_health::{
    ServingStatus,
    pb::health_server::HealthServer,
    server::{HealthReporter, HealthService},
};
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt, util::BoxCloneSyncService};
use tower_http::trace::TraceLayer;

use crate::{ServiceAddr, admission::AdmissionLayer, local, rpc_metrics::RpcMetricsLayer};

/// How often the server pings an HTTP/2 connection that is otherwise silent.
const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(20);
/// How long a ping may go unanswered before the connection (and its streams) is closed.
const KEEPALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

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
    /// Time it keeps serving, NOT_SERVING, after shutdown was asked.
    drain: std::time::Duration,
    admission: AdmissionLayer,
}

impl GrpcServer {
    /// Admits at most `max_in_flight` requests at once (0: any number), shedding by priority
    /// past that ([`crate::admission`]).
    pub fn with_admission(mut self, max_in_flight: usize) -> Self {
        self.admission = AdmissionLayer::new(self.name, max_in_flight);
        self
    }

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
            drain: std::time::Duration::ZERO,
            admission: AdmissionLayer::new(name, 0),
        })
    }

    /// On shutdown, keeps serving for `drain` after reporting NOT_SERVING, so that balancing
    /// callers and Kubernetes endpoints stop sending calls before it stops taking them.
    pub fn with_drain(mut self, drain: std::time::Duration) -> Self {
        self.drain = drain;
        self
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
        let metered = RpcMetricsLayer { service: self.name };
        let traced = ServiceBuilder::new()
            .layer(trace.clone())
            .layer(metered)
            .layer(self.admission.clone())
            .layer(ClientApiFramesLayer)
            .service(routes.clone().add_service(self.health.clone()));
        let answered =
            ServiceExt::<http::Request<Body>>::map_response(traced, |answer| answer.map(Body::new));
        let in_process = ServiceExt::<http::Request<Body>>::map_err(answered, BoxError::from);
        let _registration = local::register(&self.endpoint, BoxCloneSyncService::new(in_process));
        let readiness = self.readiness.clone();
        let (name, drain) = (self.name, self.drain);
        let stop = async move {
            shutdown.cancelled().await;
            readiness.not_serving().await;
            if !drain.is_zero() {
                tracing::info!(
                    service = name,
                    ?drain,
                    "NOT_SERVING; draining before stopping"
                );
                tokio::time::sleep(drain).await;
            }
        };
        Server::builder()
            // A peer that vanished without closing (a phone off the network) is noticed
            // within the ping interval plus its timeout, and its streams end.
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
            .tcp_keepalive(Some(KEEPALIVE_INTERVAL))
            .initial_stream_window_size(http2::STREAM_WINDOW)
            .initial_connection_window_size(http2::CONNECTION_WINDOW)
            .max_frame_size(http2::MAX_FRAME)
            .layer(trace)
            .layer(metered)
            .layer(self.admission)
            .layer(ClientApiFramesLayer)
            .add_routes(routes)
            .add_service(self.health)
            .add_service(reflection)
            .serve_with_incoming_shutdown(incoming, stop)
            .await?;
        tracing::info!(service = self.name, "gRPC server stopped");
        Ok(())
    }
}

/// Gives a stable code to the client API's requests that tonic refuses while it reads the
/// gRPC frames, before the codec (`oxigram_proto::codec`) sees a message: a compressed flag
/// without a `grpc-encoding`, a length prefix longer than the body, no message at all. tonic
/// answers those with a trailers-only `INTERNAL` (`UNKNOWN` for a body it cannot read)
/// without `x-oxigram-error`. Every status the client API's handlers return carries that
/// entry (they are made from `oxigram_errors::Error`), so on these paths such an answer can
/// only come from the request itself: it becomes `INVALID_ARGUMENT` with
/// `INPUT_REQUEST_INVALID`, keeping tonic's words as the detail. Internal services keep
/// `INTERNAL`: a frame they cannot read was written by another service, not by a client.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientApiFramesLayer;

impl<S> Layer<S> for ClientApiFramesLayer {
    type Service = ClientApiFrames<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ClientApiFrames { inner }
    }
}

/// See [`ClientApiFramesLayer`].
#[derive(Debug, Clone)]
pub struct ClientApiFrames<S> {
    inner: S,
}

type Recode<B> = fn(http::Response<B>) -> http::Response<B>;

const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: http::HeaderName = http::HeaderName::from_static("grpc-message");
const GRPC_STATUS_DETAILS: http::HeaderName =
    http::HeaderName::from_static("grpc-status-details-bin");

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for ClientApiFrames<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
{
    type Response = http::Response<ResBody>;
    type Error = S::Error;
    type Future = Either<MapOk<S::Future, Recode<ResBody>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let client_api = request.uri().path().starts_with(CLIENT_API_PATH_PREFIX);
        let answer = self.inner.call(request);
        if client_api {
            Either::Left(answer.map_ok(code_frame_refusal as Recode<ResBody>))
        } else {
            Either::Right(answer)
        }
    }
}

/// Rewrites a trailers-only `INTERNAL` or `UNKNOWN` without a stable code; see
/// [`ClientApiFramesLayer`]. Anything else passes unchanged.
fn code_frame_refusal<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    if headers.contains_key(ERROR_CODE_HEADER) {
        return response;
    }
    // Only grpc-status and grpc-message are read: tonic's parser of a whole header map
    // panics on malformed status details.
    let mut bare = http::HeaderMap::new();
    for name in [GRPC_STATUS, GRPC_MESSAGE] {
        if let Some(value) = headers.get(&name) {
            bare.insert(name, value.clone());
        }
    }
    // No grpc-status among the headers: the answer is a stream, not a refusal.
    let Some(refused) = Status::from_header_map(&bare) else {
        return response;
    };
    if !matches!(refused.code(), Code::Internal | Code::Unknown) {
        return response;
    }
    let recoded = request_invalid(refused.message());
    headers.remove(GRPC_MESSAGE);
    headers.remove(GRPC_STATUS_DETAILS);
    if recoded.add_header(headers).is_err() {
        // The detail could not be a header value: the code alone still says it all.
        let _ = request_invalid("the request cannot be read").add_header(headers);
    }
    response.extensions_mut().insert(recoded);
    response
}

#[cfg(test)]
mod tests {
    use oxigram_errors::code_of;

    use super::*;

    /// The answer of a service that refuses every call with `status`.
    async fn answer(path: &str, status: Status) -> Result<Status, BoxError> {
        let refuse = tower::service_fn(move |_: http::Request<()>| {
            let status = status.clone();
            async move { Ok::<_, BoxError>(status.into_http::<()>()) }
        });
        let request = http::Request::builder().uri(path).body(())?;
        let response = ClientApiFramesLayer.layer(refuse).oneshot(request).await?;
        Ok(Status::from_header_map(response.headers()).ok_or("no grpc-status")?)
    }

    #[tokio::test]
    async fn frame_refusals_of_the_client_api_get_a_stable_code() -> Result<(), BoxError> {
        for tonic_refusal in [
            Status::internal("Unexpected EOF decoding stream."),
            Status::internal(
                "protocol error: received message with compressed-flag but no grpc-encoding was specified",
            ),
            Status::unknown("error reading a body from connection"),
        ] {
            let recoded = answer("/oxigram.api.v1.Messages/SendMessage", tonic_refusal).await?;
            assert_eq!(recoded.code(), Code::InvalidArgument);
            assert_eq!(code_of(&recoded).as_deref(), Some("INPUT_REQUEST_INVALID"));
            assert!(recoded.message().starts_with("INPUT_REQUEST_INVALID: "));
        }
        Ok(())
    }

    #[tokio::test]
    async fn other_answers_pass_unchanged() -> Result<(), BoxError> {
        // A coded INTERNAL is the server's own fault and says so.
        let coded: Status = oxigram_errors::Error::internal("boom").into();
        let kept = answer("/oxigram.api.v1.Users/GetMe", coded).await?;
        assert_eq!(kept.code(), Code::Internal);
        assert_eq!(code_of(&kept).as_deref(), Some("INTERNAL"));
        // Other codes, and every answer of an internal service, are left alone.
        let kept = answer("/oxigram.api.v1.Users/GetMe", Status::unimplemented("no")).await?;
        assert_eq!(kept.code(), Code::Unimplemented);
        let kept = answer(
            "/oxigram.messages.v1.Messages/SendMessage",
            Status::internal("x"),
        )
        .await?;
        assert_eq!(kept.code(), Code::Internal);
        assert_eq!(code_of(&kept), None);
        Ok(())
    }
}
