//! Client-side balancing over every replica of a service. An endpoint whose host is a name
//! (a Kubernetes headless Service, say) is resolved every `endpoint_refresh_ms`; each address
//! that answers SERVING on its gRPC health service joins the channel's set, and an address
//! that is no longer resolved, or stops being SERVING, leaves it. Calls are spread over the
//! set by tower's power-of-two-choices balancer (least pending requests of two picked at
//! random), each address over its own HTTP/2 connection. Behind a ClusterIP Service the name
//! resolves to one virtual address, so every call of one caller would go to the same pod
//! over its one long-lived connection; over the pods' own addresses, scaling a callee out
//! spreads the calls.
//!
//! A replica that shuts down reports NOT_SERVING first and keeps serving for its drain time
//! ([`crate::Config::shutdown_drain_ms`]); callers drop it at their next refresh, so a drain
//! longer than the refresh loses no call.
//!
//! Names can also be resolved from a hosts file (`balancing_hosts_file`: lines of
//! `address name…`, read at every refresh) before DNS: a way to list replicas by hand where
//! there is no DNS for them.

use std::{
    collections::{BTreeSet, HashMap, hash_map::Entry},
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
    sync::{
        Arc, LazyLock, RwLock,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use tonic::transport::{Channel, Endpoint, channel::Change};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

/// How a balanced channel finds its addresses.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// Time between two resolutions (and health checks) of the name.
    pub refresh: Duration,
    /// A hosts file consulted before DNS.
    pub hosts_file: Option<PathBuf>,
}

impl Default for Discovery {
    fn default() -> Self {
        Self {
            refresh: Duration::from_millis(crate::config::DEFAULT_ENDPOINT_REFRESH_MS),
            hosts_file: None,
        }
    }
}

/// The process's discovery settings, which every channel made after [`set_discovery`] uses.
static DISCOVERY: LazyLock<RwLock<Discovery>> = LazyLock::new(Default::default);

/// Sets how channels made from now on find their addresses (once, from the configuration).
pub fn set_discovery(discovery: Discovery) {
    if let Ok(mut current) = DISCOVERY.write() {
        *current = discovery;
    }
}

pub fn discovery() -> Discovery {
    DISCOVERY
        .read()
        .map(|current| current.clone())
        .unwrap_or_default()
}

/// A channel to `endpoint` and the number of addresses it currently balances over. An
/// endpoint naming an IP address is one lazily connected channel (count always 1); a name is
/// balanced over its resolved, serving addresses.
pub fn remote_channel(
    endpoint: &str,
    configure: impl Fn(Endpoint) -> Endpoint + Send + 'static,
    discovery: &Discovery,
) -> anyhow::Result<(Channel, Arc<AtomicUsize>)> {
    let base = Endpoint::from_shared(endpoint.to_owned())?;
    let uri = base.uri().clone();
    let host = uri
        .host()
        .ok_or_else(|| anyhow::anyhow!("endpoint {endpoint} has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    if host.parse::<IpAddr>().is_ok() {
        return Ok((
            configure(base).connect_lazy(),
            Arc::new(AtomicUsize::new(1)),
        ));
    }
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    let scheme = uri.scheme_str().unwrap_or("http").to_owned();
    let (channel, changes) = Channel::balance_channel::<SocketAddr>(64);
    let members = Arc::new(AtomicUsize::new(0));
    let name = Name {
        endpoint: endpoint.to_owned(),
        host,
        port,
        scheme,
    };
    tokio::spawn(follow(
        name,
        configure,
        discovery.clone(),
        changes,
        members.clone(),
    ));
    Ok((channel, members))
}

struct Name {
    endpoint: String,
    host: String,
    port: u16,
    scheme: String,
}

impl Name {
    fn url(&self, addr: SocketAddr) -> String {
        format!("{}://{addr}", self.scheme)
    }
}

/// Keeps the balanced set equal to the serving addresses of `name` until the channel is
/// dropped.
async fn follow(
    name: Name,
    configure: impl Fn(Endpoint) -> Endpoint,
    discovery: Discovery,
    changes: tokio::sync::mpsc::Sender<Change<SocketAddr, Endpoint>>,
    members: Arc<AtomicUsize>,
) {
    let mut current = BTreeSet::new();
    // One health connection per resolved address, kept while it stays resolved.
    let mut probes: HashMap<SocketAddr, HealthClient<Channel>> = HashMap::new();
    let mut logged_failure = false;
    while !changes.is_closed() {
        let candidates = match resolve(&name, discovery.hosts_file.as_deref()).await {
            Ok(resolved) => {
                logged_failure = false;
                probes.retain(|addr, _| resolved.contains(addr));
                resolved
            }
            Err(err) => {
                if !logged_failure {
                    tracing::warn!(endpoint = %name.endpoint, error = %err, "cannot resolve a service's name; keeping its last addresses that still serve");
                    logged_failure = true;
                }
                // A DNS hiccup must not empty the set, but a replica that is gone (a stopped
                // container's name stops resolving) must leave it: its probe decides.
                current.clone()
            }
        };
        let mut serving = BTreeSet::new();
        for addr in candidates {
            let probe = match probes.entry(addr) {
                Entry::Occupied(entry) => entry.into_mut(),
                Entry::Vacant(entry) => {
                    let Ok(endpoint) = Endpoint::from_shared(name.url(addr)) else {
                        continue;
                    };
                    entry.insert(HealthClient::new(
                        endpoint
                            .connect_timeout(discovery.refresh)
                            .timeout(discovery.refresh)
                            .connect_lazy(),
                    ))
                }
            };
            if is_serving(probe).await {
                serving.insert(addr);
            }
        }
        for gone in current.difference(&serving) {
            tracing::info!(endpoint = %name.endpoint, address = %gone, "address leaves the balanced set");
            if changes.send(Change::Remove(*gone)).await.is_err() {
                return;
            }
        }
        for new in serving.difference(&current) {
            let Ok(endpoint) = Endpoint::from_shared(name.url(*new)) else {
                continue;
            };
            tracing::info!(endpoint = %name.endpoint, address = %new, "address joins the balanced set");
            if changes
                .send(Change::Insert(*new, configure(endpoint)))
                .await
                .is_err()
            {
                return;
            }
        }
        members.store(serving.len(), Ordering::Relaxed);
        current = serving;
        tokio::time::sleep(discovery.refresh).await;
    }
}

/// The addresses of the name: from the hosts file when it lists the name, else from DNS.
async fn resolve(name: &Name, hosts_file: Option<&Path>) -> anyhow::Result<BTreeSet<SocketAddr>> {
    if let Some(path) = hosts_file {
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let listed = hosts_entries(&text, &name.host);
        if !listed.is_empty() {
            return Ok(listed
                .into_iter()
                .map(|ip| SocketAddr::new(ip, name.port))
                .collect());
        }
    }
    Ok(tokio::net::lookup_host((name.host.as_str(), name.port))
        .await?
        .collect())
}

/// The addresses a hosts file gives `host`.
fn hosts_entries(text: &str, host: &str) -> BTreeSet<IpAddr> {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let ip = fields.next()?.parse::<IpAddr>().ok()?;
            fields
                .any(|name| name.eq_ignore_ascii_case(host))
                .then_some(ip)
        })
        .collect()
}

async fn is_serving(probe: &mut HealthClient<Channel>) -> bool {
    probe
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .is_ok_and(|answer| answer.get_ref().status == ServingStatus::Serving as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_file_lists_every_address_of_a_name() {
        let text = "127.0.0.2 messages.test other\n# 127.0.0.9 messages.test\n\
                    127.0.0.3\tMESSAGES.test # second replica\nbad line\n::1 messages.test\n";
        let found: Vec<String> = hosts_entries(text, "messages.test")
            .into_iter()
            .map(|ip| ip.to_string())
            .collect();
        assert_eq!(found, ["127.0.0.2", "127.0.0.3", "::1"]);
        assert!(hosts_entries(text, "updates.test").is_empty());
    }
}
