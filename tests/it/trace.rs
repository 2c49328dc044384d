//! One send produces spans in gateway, messages, updates and dispatch that share one trace id,
//! each hop the child of the one before, across gRPC calls and across outbox hand-offs.

use std::{collections::HashMap, time::Duration};

use anyhow::Context;
use opentelemetry::{Value, trace::SpanId};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use oxigram_tests::{Mode, System, eventually};

fn is(s: &SpanData, name: &str, destination: Option<&str>) -> bool {
    s.name == name
        && destination.is_none_or(|d| {
            s.attributes
                .iter()
                .any(|kv| kv.key.as_str() == "destination" && kv.value == Value::from(d.to_owned()))
        })
}

fn find<'a>(spans: &'a [SpanData], name: &str, destination: Option<&str>) -> Option<&'a SpanData> {
    spans.iter().find(|s| is(s, name, destination))
}

/// The span's ancestors that have ended, nearest first.
fn ancestors<'a>(spans: &'a [SpanData], span: &'a SpanData) -> impl Iterator<Item = &'a SpanData> {
    std::iter::successors(Some(span), |child| {
        spans
            .iter()
            .find(|s| s.span_context.span_id() == child.parent_span_id)
    })
    .skip(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_send_is_one_trace_across_every_hop() -> anyhow::Result<()> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let telemetry = oxigram_telemetry::TelemetryConfig {
        log_filter: "info,sqlx=warn".into(),
        ..Default::default()
    };
    let _guard = oxigram_telemetry::init_with_provider("oxigram", &telemetry, provider.clone())?;

    let system = System::start(Mode::OneProcess).await?;
    let mut alice = system.device().await?;
    alice.sign_up("15550201", "Alice").await?;
    let mut bob = system.device().await?;
    let bob_id = bob.sign_up("15550202", "Bob").await?.id;
    let mut stream = bob.stream(0).await?;
    exporter.reset();

    alice.send(bob_id, 9, "traced").await?;
    oxigram_tests::client::next_logged(&mut stream, Duration::from_secs(15))
        .await
        .context("no push")?;

    let chain = [
        ("/oxigram.api.v1.Messages/SendMessage", None),
        ("/oxigram.messages.v1.Messages/SendMessage", None),
        ("messages.send_group", None),
        ("/oxigram.updates.v1.Updates/Append", None),
        ("outbox.deliver", Some("dispatch")),
        ("/oxigram.dispatch.v1.Dispatch/Enqueue", None),
        ("outbox.deliver", Some("push")),
        ("/oxigram.gateway.v1.GatewayPush/Push", None),
    ];
    let spans = eventually(
        Duration::from_secs(10),
        "every span of the chain",
        || async {
            let _ = provider.force_flush();
            let spans = exporter.get_finished_spans()?;
            let dialogs = find(&spans, "/oxigram.dialogs.v1.Dialogs/ApplyEvents", None).is_some();
            // A parent ends after its child: wait until the push's whole line has ended.
            let (push, to_push) = chain[chain.len() - 1];
            let line_ended = find(&spans, push, to_push)
                .is_some_and(|push| ancestors(&spans, push).any(|s| is(s, chain[0].0, None)));
            Ok((dialogs && line_ended).then_some(spans))
        },
    )
    .await?;

    let root = find(&spans, chain[0].0, None).context("gateway span")?;
    let trace_id = root.span_context.trace_id();
    assert_eq!(
        root.parent_span_id,
        SpanId::INVALID,
        "the client's call starts the trace"
    );
    // Walk from the push back to the client's call: the send's two events may take separate
    // paths (updates splits users among workers), and only the recipient's ends in a push.
    let by_id: HashMap<SpanId, &SpanData> = spans
        .iter()
        .map(|s| (s.span_context.span_id(), s))
        .collect();
    let (last, hops) = chain.split_last().context("a chain")?;
    let mut child = find(&spans, last.0, last.1).context("push span")?;
    for (name, dest) in hops.iter().rev() {
        assert_eq!(
            child.span_context.trace_id(),
            trace_id,
            "{} is in the send's trace",
            child.name
        );
        let parent = by_id.get(&child.parent_span_id).copied();
        assert!(
            parent.is_some_and(|p| is(p, name, *dest)),
            "{} is the child of {name} {dest:?}",
            child.name
        );
        child = parent.context("parent span")?;
    }
    assert_eq!(
        child.span_context.span_id(),
        root.span_context.span_id(),
        "the chain starts at the client's call"
    );
    // Dialogs is fed from the same send, through the update log's outbox.
    let append_span = find(&spans, chain[3].0, None).context("append span")?;
    let to_dialogs = find(&spans, "outbox.deliver", Some("dialogs")).context("dialogs hand-off")?;
    let apply =
        find(&spans, "/oxigram.dialogs.v1.Dialogs/ApplyEvents", None).context("dialogs span")?;
    assert_eq!(
        to_dialogs.parent_span_id,
        append_span.span_context.span_id()
    );
    assert_eq!(apply.parent_span_id, to_dialogs.span_context.span_id());
    assert_eq!(apply.span_context.trace_id(), trace_id);
    Ok(())
}
