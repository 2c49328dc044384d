//! In-process calls. When the callee serves in this same process (single-binary mode, or any
//! `serve --target` list of several services), a client's call goes straight to the callee's
//! routes, through the same tracing layer, instead of through HTTP/2 framing, a loopback
//! socket and two wake-ups of the network stack: on a small machine those hops cost more CPU
//! than the work they carry. Requests and answers are still encoded, so the callee cannot
//! tell the two paths apart. Across processes nothing changes: the endpoint is not registered
//! here and the call goes over the network.

use std::{
    collections::HashMap,
    sync::{
        Arc, LazyLock, RwLock,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use futures::future::BoxFuture;
use tonic::{Status, body::Body, transport::Channel};
use tower::{BoxError, Service, util::BoxCloneSyncService};

/// A service's routes as callable in-process.
pub type LocalRoutes = BoxCloneSyncService<http::Request<Body>, http::Response<Body>, BoxError>;

/// The routes served in this process, by the endpoint clients know them by, each with the
/// number of the registration that put it there.
static SERVED_HERE: LazyLock<RwLock<HashMap<String, (u64, LocalRoutes)>>> =
    LazyLock::new(Default::default);
static REGISTRATIONS: AtomicU64 = AtomicU64::new(0);

/// Keeps routes callable in-process; dropping it (the server stopped) sends calls back to
/// the network, where a stopped service answers as it would to another process.
pub struct Registration {
    endpoint: String,
    number: u64,
}

/// Makes `routes` callable in-process under `endpoint`, replacing any earlier registration.
pub fn register(endpoint: &str, routes: LocalRoutes) -> Registration {
    let number = REGISTRATIONS.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut served) = SERVED_HERE.write() {
        served.insert(endpoint.to_owned(), (number, routes));
    }
    Registration {
        endpoint: endpoint.to_owned(),
        number,
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut served) = SERVED_HERE.write() {
            // A later server of the same endpoint keeps its own registration.
            if served
                .get(&self.endpoint)
                .is_some_and(|(n, _)| *n == self.number)
            {
                served.remove(&self.endpoint);
            }
        }
    }
}

fn served_here(endpoint: &str) -> Option<LocalRoutes> {
    SERVED_HERE
        .read()
        .ok()
        .and_then(|served| served.get(endpoint).map(|(_, routes)| routes.clone()))
}

/// A client's way to one endpoint: its in-process routes when they are served here at the
/// time of the call, the network otherwise.
#[derive(Clone)]
pub struct Link {
    endpoint: Arc<str>,
    remote: Channel,
    /// Addresses the remote channel balances over ([`crate::balance`]): with none, a call
    /// fails at once instead of waiting in the balancer for one to appear.
    remote_addresses: Arc<AtomicUsize>,
    timeout: Duration,
    local: Option<LocalRoutes>,
}

impl Link {
    pub fn new(endpoint: &str, remote: Channel, timeout: Duration) -> Self {
        Self::balanced(endpoint, remote, Arc::new(AtomicUsize::new(1)), timeout)
    }

    /// A link whose remote channel balances over `remote_addresses` addresses.
    pub fn balanced(
        endpoint: &str,
        remote: Channel,
        remote_addresses: Arc<AtomicUsize>,
        timeout: Duration,
    ) -> Self {
        Self {
            endpoint: endpoint.into(),
            remote,
            remote_addresses,
            timeout,
            local: None,
        }
    }
}

impl Service<http::Request<Body>> for Link {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<http::Response<Body>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.local = served_here(&self.endpoint);
        match &mut self.local {
            Some(local) => local.poll_ready(cx),
            None => self.remote.poll_ready(cx).map_err(BoxError::from),
        }
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        match &mut self.local {
            Some(local) => {
                let answer = local.call(request);
                let timeout = self.timeout;
                Box::pin(async move {
                    // The deadline the network path's channel enforces.
                    tokio::time::timeout(timeout, answer)
                        .await
                        .map_err(|_| Status::deadline_exceeded("the call timed out"))?
                })
            }
            None if self.remote_addresses.load(Ordering::Relaxed) == 0 => {
                let endpoint = self.endpoint.clone();
                Box::pin(async move {
                    Err(BoxError::from(Status::unavailable(format!(
                        "no serving replica of {endpoint}"
                    ))))
                })
            }
            None => {
                let answer = self.remote.call(request);
                Box::pin(async move { answer.await.map_err(BoxError::from) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;
    use tonic::{Code, service::Routes};
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };

    use crate::{GrpcServer, ServiceAddr};

    /// A server listening on one port while clients know it by an endpoint where nothing
    /// listens: only the in-process path can answer them.
    #[tokio::test]
    async fn calls_stay_in_process_while_the_callee_serves_here() -> anyhow::Result<()> {
        let unreachable = "http://127.0.0.1:9";
        let me = ServiceAddr {
            listen: "127.0.0.1:0".parse()?,
            endpoint: unreachable.to_owned(),
            database_url: None,
        };
        let server = GrpcServer::bind("local-test", &me).await?;
        server.readiness().serving().await;
        let shutdown = CancellationToken::new();
        // No routes of its own: the server's health service answers.
        let serving = tokio::spawn(server.serve(Routes::default(), shutdown.clone()));
        let mut client = HealthClient::new(crate::channel(unreachable, Duration::from_secs(2))?);
        let mut answered = None;
        for _ in 0..100 {
            match client.check(HealthCheckRequest::default()).await {
                Ok(answer) => {
                    answered = Some(answer.into_inner().status);
                    break;
                }
                // The server task may not have registered yet.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        assert_eq!(answered, Some(ServingStatus::Serving as i32));

        // Stopped, it is known only by its endpoint again, where nothing answers.
        shutdown.cancel();
        serving.await??;
        let after = client.check(HealthCheckRequest::default()).await;
        assert_eq!(after.err().map(|s| s.code()), Some(Code::Unavailable));
        Ok(())
    }
}
