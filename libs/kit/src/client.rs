//! Client channels to other services: lazily connected, reconnecting, with a deadline on every
//! call and the trace context injected into every request.

use std::time::Duration;

use oxigram_outbox::Refused;
use oxigram_proto::http2;
use oxigram_telemetry::propagation::TracePropagation;
use tokio_util::sync::CancellationToken;
use tonic::{service::interceptor::InterceptedService, transport::Endpoint};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::local::Link;

/// A channel to another service, carrying trace context.
pub type GrpcChannel = InterceptedService<Link, TracePropagation>;

/// A channel to `endpoint`: in-process when the service is served in this process at the
/// time of a call ([`crate::local`]), otherwise lazily connected over the network (the
/// first call connects, a broken connection reconnects).
/// An endpoint whose host is a name is balanced over the name's serving addresses
/// ([`crate::balance`]).
pub fn channel(endpoint: &str, timeout: Duration) -> anyhow::Result<GrpcChannel> {
    let connection = move |endpoint: Endpoint| {
        endpoint
            .connect_timeout(Duration::from_secs(2))
            .timeout(timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(20))
            .initial_stream_window_size(http2::STREAM_WINDOW)
            .initial_connection_window_size(http2::CONNECTION_WINDOW)
            .max_frame_size(http2::MAX_FRAME)
    };
    let (remote, addresses) =
        crate::balance::remote_channel(endpoint, connection, &crate::balance::discovery())?;
    Ok(InterceptedService::new(
        Link::balanced(endpoint, remote, addresses, timeout),
        TracePropagation,
    ))
}

/// Waits, with capped exponential backoff, until the service at `endpoint` reports SERVING.
/// Returns an error only when `shutdown` fires first.
pub async fn wait_serving(
    name: &str,
    endpoint: &str,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let mut delay = Duration::from_millis(50);
    let mut client = HealthClient::new(channel(endpoint, Duration::from_secs(2))?);
    loop {
        let answer = client
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await;
        match answer {
            Ok(resp) if resp.get_ref().status == ServingStatus::Serving as i32 => return Ok(()),
            Ok(_) => tracing::debug!(dependency = name, "dependency not serving yet"),
            Err(status) => {
                tracing::debug!(dependency = name, %status, "dependency not answering yet")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => anyhow::bail!("shut down while waiting for {name}"),
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

/// How an outbox delivery reads a call's failure: the destination refusing its events as
/// malformed is permanent; events it holds back until earlier ones arrive
/// (`EVENTS_AHEAD_OF_GAP`) are soon due again; anything else (down, overloaded, timed out,
/// failing inside) is a reason to try again later.
pub fn refused(status: tonic::Status) -> Refused {
    let detail = status.to_string();
    if status.code() == tonic::Code::InvalidArgument {
        Refused::permanent(detail)
    } else if oxigram_errors::code_of(&status).as_deref() == Some("EVENTS_AHEAD_OF_GAP") {
        Refused::waiting(detail)
    } else {
        Refused::transient(detail)
    }
}
