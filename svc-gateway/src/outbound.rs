//! Everything svc-gateway sends to other services: the calls that answer the client API, to
//! the domain services it composes (svc-messages, svc-updates, svc-dialogs, svc-media), each
//! through its generated client. There is no outbox here: every call is one the client waits
//! for, and nothing the gateway writes is a fact another service must learn of.

use oxigram_kit::{Config, GrpcChannel};
use oxigram_proto::{
    dialogs::v1::dialogs_client::DialogsClient, media::v1::media_client::MediaClient,
    messages::v1::messages_client::MessagesClient, updates::v1::updates_client::UpdatesClient,
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
