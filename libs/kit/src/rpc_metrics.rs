//! Request count and latency of every gRPC method a service serves:
//! `oxigram_rpc_requests_total{service,method,code}` and
//! `oxigram_rpc_duration_seconds{service,method}`. The code is the gRPC status the caller
//! got, read from the headers of a trailers-only answer or from the trailers at the end of
//! the body; a body dropped before its trailers (the caller went away) counts as `CANCELLED`.
//! The duration runs until the answer's end, so a stream's is how long it stayed open.

use std::{
    pin::Pin,
    sync::OnceLock,
    task::{Context, Poll},
    time::Instant,
};

use http_body::{Body, Frame, SizeHint};
use prometheus_client::metrics::{
    counter::Counter,
    family::Family,
    histogram::{Histogram, exponential_buckets},
};
use tonic::Code;
use tower::{Layer, Service};

type Labels = Vec<(&'static str, String)>;

struct RpcMetrics {
    requests: Family<Labels, Counter>,
    duration: Family<Labels, Histogram>,
}

fn metrics() -> &'static RpcMetrics {
    static METRICS: OnceLock<RpcMetrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let m = RpcMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(|| {
                // 1 ms to about 33 s.
                Histogram::new(exponential_buckets(0.001, 2.0, 16))
            }),
        };
        oxigram_telemetry::metrics::register(
            "rpc_requests",
            "gRPC requests served, by service, method and the status code answered",
            m.requests.clone(),
        );
        oxigram_telemetry::metrics::register(
            "rpc_duration_seconds",
            "Time from a gRPC request's arrival to the end of its answer",
            m.duration.clone(),
        );
        m
    })
}

/// The status code's name as Prometheus labels it: `OK`, `INVALID_ARGUMENT`, …
pub fn code_label(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

fn grpc_status(headers: &http::HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    Some(Code::from_i32(value.parse().ok()?))
}

/// Counts and times every request of the service named `service`.
#[derive(Debug, Clone, Copy)]
pub struct RpcMetricsLayer {
    pub service: &'static str,
}

impl<S> Layer<S> for RpcMetricsLayer {
    type Service = RpcMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RpcMetricsService {
            inner,
            service: self.service,
        }
    }
}

/// See [`RpcMetricsLayer`].
#[derive(Debug, Clone)]
pub struct RpcMetricsService<S> {
    inner: S,
    service: &'static str,
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for RpcMetricsService<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Body,
{
    type Response = http::Response<MeteredBody<ResBody>>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let mut call = Call {
            service: self.service,
            method: request.uri().path().to_owned(),
            started: Instant::now(),
            recorded: false,
        };
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            if let Some(code) = grpc_status(response.headers()) {
                call.record(code);
            }
            Ok(response.map(|body| MeteredBody { body, call }))
        })
    }
}

/// One request being answered; records itself once.
struct Call {
    service: &'static str,
    method: String,
    started: Instant,
    recorded: bool,
}

impl Call {
    fn record(&mut self, code: Code) {
        if std::mem::replace(&mut self.recorded, true) {
            return;
        }
        let m = metrics();
        // A path no route serves is the caller's text: one label for all of them keeps the
        // series bounded.
        let method = if code == Code::Unimplemented {
            "other".to_owned()
        } else {
            std::mem::take(&mut self.method)
        };
        let mut labels = vec![("service", self.service.to_owned()), ("method", method)];
        m.duration
            .get_or_create(&labels)
            .observe(self.started.elapsed().as_secs_f64());
        labels.push(("code", code_label(code).to_owned()));
        m.requests.get_or_create(&labels).inc();
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.record(Code::Cancelled);
    }
}

pin_project_lite::pin_project! {
    /// An answer's body that records its call at the trailers.
    pub struct MeteredBody<B> {
        #[pin]
        body: B,
        call: Call,
    }
}

impl<B: Body> Body for MeteredBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let frame = this.body.poll_frame(cx);
        match &frame {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(grpc_status) {
                    this.call.record(code);
                }
            }
            Poll::Ready(Some(Err(_))) => this.call.record(Code::Internal),
            Poll::Ready(None) => this.call.record(Code::Ok),
            Poll::Pending => {}
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
