//! W3C trace context across gRPC hops: a client interceptor that injects the current span's
//! context, and the server-side span maker that continues it. The same text form is stored
//! with outbox rows so a trace also survives the hand-off through a table.

use std::collections::{HashMap, HashSet};

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry_http::HeaderExtractor;
use tonic::{
    Request, Status,
    metadata::{MetadataKey, MetadataMap, MetadataValue},
    service::Interceptor,
};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct MetadataInjector<'a>(&'a mut MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value.as_str()),
        ) {
            self.0.insert(key, value);
        }
    }
}

/// Client interceptor: every outgoing call carries the caller's current trace context.
#[derive(Clone, Copy, Debug, Default)]
pub struct TracePropagation;

impl Interceptor for TracePropagation {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let cx = Span::current().context();
        opentelemetry::global::get_text_map_propagator(|p| {
            p.inject_context(&cx, &mut MetadataInjector(request.metadata_mut()))
        });
        Ok(request)
    }
}

/// Makes the server span of one gRPC request, continuing the caller's trace. The span is named
/// after the RPC (`/package.Service/Method`) and tagged with the oxigram service that serves it.
#[derive(Clone, Debug)]
pub struct GrpcMakeSpan {
    pub service: &'static str,
}

impl<B> tower_http::trace::MakeSpan<B> for GrpcMakeSpan {
    fn make_span(&mut self, request: &http::Request<B>) -> Span {
        let rpc = request.uri().path();
        let span = tracing::info_span!(
            "grpc.server",
            otel.name = rpc,
            otel.kind = "server",
            rpc.system = "grpc",
            rpc.method = rpc,
            oxigram.service = self.service,
        );
        let parent = opentelemetry::global::get_text_map_propagator(|p| {
            p.extract(&HeaderExtractor(request.headers()))
        });
        // Must happen before the span is first entered.
        let _ = span.set_parent(parent);
        span
    }
}

/// The current span's trace context as text (a `traceparent` value), for storing with a row.
pub fn current_traceparent() -> Option<String> {
    let cx = Span::current().context();
    let mut carrier = HashMap::new();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut carrier));
    carrier.remove("traceparent")
}

struct OneHeader<'a>(&'a str);

impl Extractor for OneHeader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == "traceparent").then_some(self.0)
    }
    fn keys(&self) -> Vec<&str> {
        vec!["traceparent"]
    }
}

/// Continues stored traces in a batch's `span`: it becomes the child of the first trace; each
/// other distinct trace (once, however many rows carry it) gets a link from the batch span and
/// a span of its own, named like the batch, that links to the batch span. A backend showing any
/// member's trace then finds the batch and, through it, the hops that followed.
pub fn continue_stored<'a>(span: &Span, traceparents: impl IntoIterator<Item = &'a str>) {
    use opentelemetry::trace::TraceContextExt;

    let mut seen = HashSet::new();
    let mut members = Vec::new();
    for tp in traceparents {
        let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(&OneHeader(tp)));
        let member = cx.span().span_context().clone();
        if !member.is_valid() || !seen.insert(member.trace_id()) {
            continue;
        }
        if seen.len() == 1 {
            let _ = span.set_parent(cx);
        } else {
            members.push(cx);
        }
    }
    if members.is_empty() {
        return;
    }
    let batch = span.context().span().span_context().clone();
    let name = span.metadata().map_or("batch", |m| m.name());
    for cx in members {
        span.add_link(cx.span().span_context().clone());
        let member = tracing::info_span!(parent: None, "batch.member", otel.name = name);
        let _ = member.set_parent(cx);
        member.add_link(batch.clone());
    }
}
