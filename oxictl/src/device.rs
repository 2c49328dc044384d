//! A device's saved identity (auth key) and progress (applied pts): one small JSON file per
//! device, so one shell can act as several devices of several users.

use std::path::Path;

use anyhow::Context;
use oxigram_client::{AuthKey, Client, State, Verdict};
use oxigram_proto::types::v1::PtsUpdate;
use serde::{Deserialize, Serialize};

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

/// A saved device and its client.
pub struct DeviceClient {
    pub device: Device,
    pub client: Client,
}

impl DeviceClient {
    pub async fn open(path: &Path) -> anyhow::Result<Self> {
        let device = Device::load(path)?;
        let channel = oxigram_client::connect(&device.gateway).await?;
        let client = Client::new(
            channel,
            AuthKey {
                id: device.auth_key_id,
                secret: device.secret.clone(),
            },
        )?;
        Ok(Self { device, client })
    }

    /// The update state this device saved: its applied pts.
    pub fn state(&self) -> State {
        State {
            pts: self.device.pts,
            date: 0,
        }
    }

    /// Applies the answer to one of this device's own calls when it continues the device's
    /// state, and saves it; otherwise the next difference brings it.
    pub fn apply_own(&mut self, path: &Path, update: Option<PtsUpdate>) -> anyhow::Result<()> {
        if let Some(u) = update
            && self.state().verdict(u.pts, u.pts_count) == Verdict::Apply
        {
            self.device.pts = u.pts;
            self.device.save(path)?;
        }
        Ok(())
    }
}
