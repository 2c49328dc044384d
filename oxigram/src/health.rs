//! `oxigram health`: asks a service's gRPC health service whether it serves. Kubernetes
//! before 1.24 cannot probe gRPC itself, so the chart's probes run this command inside the
//! container there; operators use it the same way.

use std::time::Duration;

use tonic::transport::Endpoint;
pub use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

/// The serving status of `service` (`""`: the whole server) at `endpoint`, within `timeout`
/// (connecting included). An unreachable or silent server is an error.
pub async fn check(
    endpoint: &str,
    service: &str,
    timeout: Duration,
) -> anyhow::Result<ServingStatus> {
    let call = async {
        let channel = Endpoint::from_shared(endpoint.to_owned())?
            .connect_timeout(timeout)
            .timeout(timeout)
            .connect()
            .await?;
        let answer = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await?;
        anyhow::Ok(
            ServingStatus::try_from(answer.get_ref().status).unwrap_or(ServingStatus::Unknown),
        )
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(status) => status,
        Err(_) => anyhow::bail!("{endpoint} did not answer within {timeout:?}"),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use oxigram_kit::{GrpcServer, ServiceAddr};
    use tokio_util::sync::CancellationToken;

    use super::*;

    #[tokio::test]
    async fn reports_what_the_health_service_says_and_fails_on_silence() -> anyhow::Result<()> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        drop(listener);
        let me = ServiceAddr {
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            // Not the URL dialled below, so the check goes over the network.
            endpoint: format!("http://health-test:{port}"),
            database_url: None,
        };
        let url = format!("http://127.0.0.1:{port}");
        let timeout = Duration::from_secs(2);
        let server = GrpcServer::bind("health-test", &me).await?;
        let readiness = server.readiness();
        let stop = CancellationToken::new();
        let serving = tokio::spawn(server.serve(tonic::service::Routes::default(), stop.clone()));

        assert_eq!(check(&url, "", timeout).await?, ServingStatus::NotServing);
        readiness.serving().await;
        assert_eq!(check(&url, "", timeout).await?, ServingStatus::Serving);
        // A service name the server does not know is an error status, not SERVING.
        assert!(check(&url, "no.such.Service", timeout).await.is_err());

        stop.cancel();
        serving.await??;
        assert!(check(&url, "", Duration::from_millis(500)).await.is_err());
        Ok(())
    }
}
