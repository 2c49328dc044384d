//! Everything svc-dispatch sends to other services. One arrow: push jobs, to the gateway
//! instances that hold their users' online devices. Jobs are this service's outbox rows,
//! written by `Enqueue`; right after commit the fast path pushes them, and the relay pushes
//! whatever that missed, with backoff.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::Duration,
};

use oxigram_kit::GrpcChannel;
use oxigram_outbox::{Destination, OutboxMessage, Refused, decode_payloads};
use oxigram_proto::{
    gateway::v1::{PushRequest, gateway_push_client::GatewayPushClient},
    types::v1::PushJob,
};
use oxigram_routes::RouteLookup;

/// The outbox destination of push jobs: the gateways.
pub const TO_GATEWAYS: &str = "push";

/// The gateways, each reached at the push endpoint its routes name.
pub struct ToGateways {
    routes: RouteLookup,
    timeout: Duration,
    clients: Mutex<HashMap<String, GatewayPushClient<GrpcChannel>>>,
}

impl ToGateways {
    pub fn new(routes: RouteLookup, timeout: Duration) -> Self {
        Self {
            routes,
            timeout,
            clients: Mutex::new(HashMap::new()),
        }
    }

    fn client(&self, endpoint: &str) -> Result<GatewayPushClient<GrpcChannel>, String> {
        let mut clients = self
            .clients
            .lock()
            .map_err(|_| "client cache poisoned".to_owned())?;
        if let Some(c) = clients.get(endpoint) {
            return Ok(c.clone());
        }
        let c = GatewayPushClient::new(
            oxigram_kit::channel(endpoint, self.timeout).map_err(|e| e.to_string())?,
        );
        clients.insert(endpoint.to_owned(), c.clone());
        Ok(c)
    }
}

impl Destination for ToGateways {
    const NAME: &'static str = TO_GATEWAYS;

    async fn deliver(&self, batch: &[OutboxMessage]) -> Result<(), Refused> {
        let jobs: Vec<PushJob> = decode_payloads(batch)?;
        // Every user of the batch, resolved in one Redis round trip.
        let users: Vec<i64> = jobs.iter().map(|j| j.user_id).collect();
        let lookup = self
            .routes
            .lookup_many(&users)
            .await
            .map_err(|e| Refused::transient(format!("routes: {e}")))?;
        // Group by gateway instance; the device whose request made the event is left out.
        let mut by_instance: BTreeMap<&str, Vec<PushJob>> = BTreeMap::new();
        let mut unrouted = 0;
        for job in &jobs {
            let mut instances: Vec<&str> = lookup
                .routes
                .get(&job.user_id)
                .into_iter()
                .flatten()
                .filter(|r| r.auth_key_id != job.origin_auth_key_id)
                .map(|r| r.push_endpoint.as_str())
                .collect();
            instances.sort_unstable();
            instances.dedup();
            if instances.is_empty() {
                unrouted += 1;
            }
            for instance in instances {
                by_instance.entry(instance).or_default().push(job.clone());
            }
        }
        // No route means offline only while the table is whole. Redis lost it (restart,
        // FLUSHALL) and the gateways have not registered their streams again yet: keep the
        // batch for the relay's retry, which finds the routes back within a check or two.
        if !lookup.complete && unrouted > 0 {
            return Err(Refused::transient(format!(
                "{unrouted} jobs without routes while the route table is being rebuilt"
            )));
        }
        let pushes = by_instance.into_iter().map(|(instance, jobs)| async move {
            let mut client = self.client(instance).map_err(Refused::transient)?;
            client.push(PushRequest { jobs }).await.map_err(|s| {
                let mut refused = oxigram_kit::refused(s);
                refused.detail = format!("push to {instance}: {}", refused.detail);
                refused
            })
        });
        for outcome in futures::future::join_all(pushes).await {
            outcome?;
        }
        Ok(())
    }
}
