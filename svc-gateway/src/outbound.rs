//! Everything svc-gateway sends to other services: the calls that answer the client API, to
//! the domain services it composes (svc-messages, svc-updates, svc-dialogs, svc-media), each
//! through its generated client; and transient events to the other gateway instances. There
//! is no outbox here: every call is one the client waits for, nothing the gateway writes is a
//! fact another service must learn of, and a transient event that does not arrive is replaced
//! by the next one.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use oxigram_kit::{Config, GrpcChannel};
use oxigram_proto::{
    dialogs::v1::dialogs_client::DialogsClient,
    gateway::v1::{PushTransientRequest, TransientEvent, gateway_push_client::GatewayPushClient},
    media::v1::media_client::MediaClient,
    messages::v1::messages_client::MessagesClient,
    updates::v1::updates_client::UpdatesClient,
};

/// A client of each service the gateway calls.
pub struct Outbound {
    pub messages: MessagesClient<GrpcChannel>,
    pub updates: UpdatesClient<GrpcChannel>,
    pub dialogs: DialogsClient<GrpcChannel>,
    pub media: MediaClient<GrpcChannel>,
}

impl Outbound {
    /// The clients, each with the internal calls' deadline; none connects before its first call.
    pub fn connect(config: &Config) -> anyhow::Result<Self> {
        let (s, timeout) = (&config.services, config.rpc_timeout());
        Ok(Self {
            messages: MessagesClient::new(oxigram_kit::channel(&s.messages.endpoint, timeout)?),
            updates: UpdatesClient::new(oxigram_kit::channel(&s.updates.endpoint, timeout)?),
            dialogs: DialogsClient::new(oxigram_kit::channel(&s.dialogs.endpoint, timeout)?),
            media: MediaClient::new(oxigram_kit::channel(&s.media.endpoint, timeout)?),
        })
    }

    /// The services the gateway waits for before it serves, and where they are.
    pub fn dependencies(config: &Config) -> Vec<(&'static str, String)> {
        let s = &config.services;
        vec![
            ("messages", s.messages.endpoint.clone()),
            ("updates", s.updates.endpoint.clone()),
            ("dialogs", s.dialogs.endpoint.clone()),
            ("media", s.media.endpoint.clone()),
        ]
    }
}

/// The other gateway instances, each reached at the push endpoint its routes name, for
/// transient events (see `transient.rs`).
pub struct PeerGateways {
    timeout: Duration,
    clients: Mutex<HashMap<String, GatewayPushClient<GrpcChannel>>>,
}

impl PeerGateways {
    pub fn new(timeout: Duration) -> Self {
        Self {
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

    /// Offers the events to the devices streaming at the instance at `endpoint`.
    pub async fn push_transient(
        &self,
        endpoint: &str,
        events: Vec<TransientEvent>,
    ) -> Result<(), String> {
        let mut client = self.client(endpoint)?;
        client
            .push_transient(PushTransientRequest { events })
            .await
            .map(|_| ())
            .map_err(|s| s.to_string())
    }
}
