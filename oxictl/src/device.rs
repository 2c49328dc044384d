//! A device's saved identity (auth key) and progress (applied pts), and a client that signs
//! every call with the auth key.

use std::path::Path;

use anyhow::Context;
use oxigram_proto::api::v1::{
    auth_client::AuthClient, dialogs_client::DialogsClient, messages_client::MessagesClient,
    updates_client::UpdatesClient, users_client::UsersClient,
};
use serde::{Deserialize, Serialize};
use tonic::{
    Request, Status,
    metadata::MetadataValue,
    service::{Interceptor, interceptor::InterceptedService},
    transport::{Channel, Endpoint},
};

#[derive(Debug, Serialize, Deserialize)]
pub struct Device {
    pub gateway: String,
    pub auth_key_id: i64,
    pub secret: String,
    /// The last pts this device applied: the only cursor it moves.
    pub pts: i32,
}

impl Device {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!("no device at {}: run `oxictl keygen` first", path.display())
        })?;
        Ok(serde_json::from_str(&text)?)
    }

    /// Written to a temporary file, then renamed: a crash never leaves half a file.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(tmp, path)?;
        Ok(())
    }
}

pub async fn connect(gateway: &str) -> anyhow::Result<Channel> {
    Endpoint::from_shared(gateway.to_owned())?
        .connect()
        .await
        .with_context(|| format!("cannot reach the gateway at {gateway}"))
}

#[derive(Clone)]
pub struct SignWithKey(MetadataValue<tonic::metadata::Ascii>);

impl SignWithKey {
    /// Signs with the auth key `<auth_key_id>:<secret hex>`.
    pub fn new(auth_key_id: i64, secret: &str) -> anyhow::Result<Self> {
        Ok(Self(MetadataValue::try_from(format!(
            "{auth_key_id}:{secret}"
        ))?))
    }
}

impl Interceptor for SignWithKey {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("x-oxigram-auth-key", self.0.clone());
        Ok(request)
    }
}

/// A channel to the gateway whose every call is signed with one auth key.
pub type Signed = InterceptedService<Channel, SignWithKey>;

/// Clients of every service of the client API, over one signed channel.
#[derive(Clone)]
pub struct Api {
    channel: Signed,
}

impl Api {
    pub fn new(channel: Channel, auth_key_id: i64, secret: &str) -> anyhow::Result<Self> {
        Ok(Self {
            channel: InterceptedService::new(channel, SignWithKey::new(auth_key_id, secret)?),
        })
    }

    /// The signed channel itself, for any other client of the API.
    pub fn channel(&self) -> Signed {
        self.channel.clone()
    }
    pub fn auth(&self) -> AuthClient<Signed> {
        AuthClient::new(self.channel.clone())
    }
    pub fn users(&self) -> UsersClient<Signed> {
        UsersClient::new(self.channel.clone())
    }
    pub fn messages(&self) -> MessagesClient<Signed> {
        MessagesClient::new(self.channel.clone())
    }
    pub fn updates(&self) -> UpdatesClient<Signed> {
        UpdatesClient::new(self.channel.clone())
    }
    pub fn dialogs(&self) -> DialogsClient<Signed> {
        DialogsClient::new(self.channel.clone())
    }
}

/// A saved device and its signed clients.
pub struct DeviceClient {
    pub device: Device,
    pub api: Api,
}

impl DeviceClient {
    pub async fn open(path: &Path) -> anyhow::Result<Self> {
        let device = Device::load(path)?;
        let channel = connect(&device.gateway).await?;
        let api = Api::new(channel, device.auth_key_id, &device.secret)?;
        Ok(Self { device, api })
    }
}

impl std::ops::Deref for DeviceClient {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.api
    }
}
