//! Traces as an operator sees them: the services run as separate processes and export their
//! spans over OTLP/gRPC to a TraceService server the test runs. One send is one trace from the
//! gateway's call through messages, updates, dispatch and back to the gateway's push, and
//! through dialogs, each span reported under the `service.name` of the process that made it.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context;
use opentelemetry_proto::tonic::{
    collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
    common::v1::any_value,
    trace::v1::Span,
};
use oxigram_tests::{Mode, System, eventually};
use tonic::{Request, Response, Status};

/// A span as received, with the `service.name` of the process that exported it.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    span: Span,
}

/// The OTLP/gRPC TraceService the services export to: it keeps every span.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Received>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let mut received = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                    any_value::Value::StringValue(name) => Some(name.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for scope_spans in resource_spans.scope_spans {
                received.extend(scope_spans.spans.into_iter().map(|span| Received {
                    service: service.clone(),
                    span,
                }));
            }
        }
        self.spans
            .lock()
            .map_err(|_| Status::internal("poisoned"))?
            .extend(received);
        Ok(Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl Collector {
    /// Serves on a free loopback port; returns its URL.
    async fn start(&self) -> anyhow::Result<String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(self.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
        tokio::spawn(server);
        Ok(format!("http://{addr}"))
    }

    fn spans(&self) -> anyhow::Result<Vec<Received>> {
        Ok(self
            .spans
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .clone())
    }
}

/// The hops of one send every trace must show, as (process, span name).
const HOPS: [(&str, &str); 6] = [
    ("oxigram-gateway", "/oxigram.api.v1.Messages/SendMessage"),
    (
        "oxigram-messages",
        "/oxigram.messages.v1.Messages/SendMessage",
    ),
    ("oxigram-updates", "/oxigram.updates.v1.Updates/Append"),
    ("oxigram-dialogs", "/oxigram.dialogs.v1.Dialogs/ApplyEvents"),
    ("oxigram-dispatch", "/oxigram.dispatch.v1.Dispatch/Enqueue"),
    ("oxigram-gateway", "/oxigram.gateway.v1.GatewayPush/Push"),
];

/// The hops of [`HOPS`] a trace lacks.
fn missing_hops(trace: &[&Received]) -> Vec<(&'static str, &'static str)> {
    HOPS.iter()
        .filter(|(service, name)| {
            !trace
                .iter()
                .any(|r| r.service == *service && r.span.name == *name)
        })
        .copied()
        .collect()
}

/// The spans received so far, by trace id.
fn by_trace(spans: &[Received]) -> HashMap<Vec<u8>, Vec<&Received>> {
    let mut traces: HashMap<Vec<u8>, Vec<&Received>> = HashMap::new();
    for received in spans {
        traces
            .entry(received.span.trace_id.clone())
            .or_default()
            .push(received);
    }
    traces
}

/// The services as processes, exporting to a collector of the test's own.
async fn traced_system(collector: &Collector) -> anyhow::Result<System> {
    let (mut config, ground) = System::config().await?;
    config.telemetry.otlp_endpoint = collector.start().await?;
    System::start_with(config, ground, Mode::Processes).await
}

#[tokio::test]
async fn one_send_is_one_trace_across_the_processes() -> anyhow::Result<()> {
    let collector = Collector::default();
    let system = traced_system(&collector).await?;
    let mut alice = system.device().await?;
    alice.sign_up("15550701", "Alice").await?;
    let mut bob = system.device().await?;
    let bob_id = bob.sign_up("15550702", "Bob").await?.id;
    let mut stream = bob.stream(0).await?;

    alice.send(bob_id, 7, "traced").await?;
    oxigram_tests::client::next_logged(&mut stream, Duration::from_secs(15))
        .await
        .context("no push")?;

    let (service_names, root_trace) = eventually(
        Duration::from_secs(15),
        "a send's trace with every hop",
        || async {
            let spans = collector.spans()?;
            let traces = by_trace(&spans);
            let whole = traces.values().find(|trace| {
                trace
                    .iter()
                    .any(|r| r.span.name == HOPS[0].1 && r.span.parent_span_id.is_empty())
                    && missing_hops(trace).is_empty()
            });
            let names: HashSet<String> = spans.iter().map(|r| r.service.clone()).collect();
            Ok(whole.map(|trace| (names, trace.len())))
        },
    )
    .await?;
    eprintln!(
        "trace: one send, {root_trace} spans in its trace; processes reporting: {service_names:?}"
    );
    for service in [
        "oxigram-gateway",
        "oxigram-messages",
        "oxigram-updates",
        "oxigram-dialogs",
        "oxigram-dispatch",
    ] {
        assert!(
            service_names.contains(service),
            "no span reported by {service}: {service_names:?}"
        );
    }
    assert!(
        !service_names.contains("oxigram"),
        "a process of one service reports the generic name"
    );
    Ok(())
}

/// The traces reachable from `start` through links, `start` included: a batch carries many
/// sends' work under one trace, and each other member's trace links to it.
fn reachable<'a>(traces: &HashMap<Vec<u8>, Vec<&'a Received>>, start: &[u8]) -> Vec<&'a Received> {
    let mut seen: HashSet<Vec<u8>> = HashSet::from([start.to_vec()]);
    let mut queue = vec![start.to_vec()];
    let mut spans = Vec::new();
    while let Some(trace_id) = queue.pop() {
        for received in traces.get(&trace_id).into_iter().flatten() {
            spans.push(*received);
            for link in &received.span.links {
                if seen.insert(link.trace_id.clone()) {
                    queue.push(link.trace_id.clone());
                }
            }
        }
    }
    spans
}

/// Forty sends at once are batched at every hop (the send group, the append batch, the push
/// batch), and still each send's trace leads, through links, to every hop of its way.
#[tokio::test]
async fn each_send_of_a_burst_keeps_its_way() -> anyhow::Result<()> {
    const BURST: i64 = 40;
    let collector = Collector::default();
    let system = traced_system(&collector).await?;
    let mut alice = system.device().await?;
    alice.sign_up("15550711", "Alice").await?;
    let mut bob = system.device().await?;
    let bob_id = bob.sign_up("15550712", "Bob").await?.id;
    let mut stream = bob.stream(0).await?;
    let alice = Arc::new(alice);

    let sends = (1..=BURST).map(|random_id| {
        let alice = alice.clone();
        async move {
            alice
                .send(bob_id, random_id, &format!("burst {random_id}"))
                .await
        }
    });
    for sent in futures::future::join_all(sends).await {
        sent?;
    }
    for _ in 0..BURST {
        oxigram_tests::client::next_logged(&mut stream, Duration::from_secs(15))
            .await
            .context("a push is missing")?;
    }

    let (roots, broken) = eventually(
        Duration::from_secs(15),
        "every send's trace leading to every hop",
        || async {
            let spans = collector.spans()?;
            let traces = by_trace(&spans);
            let roots: Vec<&Vec<u8>> = traces
                .iter()
                .filter(|(_, trace)| {
                    trace.iter().any(|r| {
                        r.span.name == HOPS[0].1
                            && r.span.parent_span_id.is_empty()
                            && r.span.start_time_unix_nano > 0
                    })
                })
                .map(|(id, _)| id)
                .collect();
            let broken: Vec<Vec<(&str, &str)>> = roots
                .iter()
                .map(|id| missing_hops(&reachable(&traces, id)))
                .filter(|missing| !missing.is_empty())
                .collect();
            let done = roots.len() >= BURST as usize && broken.is_empty();
            Ok(done.then_some((roots.len(), broken.len())))
        },
    )
    .await
    .or_else(|err| {
        let spans = collector.spans()?;
        let traces = by_trace(&spans);
        let whole = traces
            .keys()
            .filter(|id| missing_hops(&reachable(&traces, id)).is_empty())
            .count();
        Err(err.context(format!(
            "{} traces received, {whole} of them lead to every hop",
            traces.len()
        )))
    })?;
    eprintln!("trace: a burst of {BURST} sends: {roots} send traces, {broken} lacking a hop");
    Ok(())
}
