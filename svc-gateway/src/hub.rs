//! The online devices of this gateway instance: one bounded channel per open update stream,
//! and the GatewayPush service through which dispatch delivers to them.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use oxigram_proto::{
    api::v1::{StreamEvent, stream_event},
    gateway::v1::{PushRequest, PushResponse, gateway_push_server::GatewayPush},
    types::v1::PushJob,
};
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

/// Updates a stream may have waiting before it counts as lagging.
pub const STREAM_BUFFER: usize = 1024;

struct Device {
    auth_key_id: i64,
    epoch: u64,
    tx: mpsc::Sender<StreamEvent>,
    lagged: Arc<AtomicBool>,
}

/// One attached stream, as its owner task sees it.
pub struct Attached {
    pub rx: mpsc::Receiver<StreamEvent>,
    /// Set when the hub dropped the stream because its buffer was full.
    pub lagged: Arc<AtomicBool>,
}

#[derive(Default)]
pub struct Hub {
    devices: Mutex<HashMap<i64, Vec<Device>>>,
}

impl Hub {
    pub fn attach(&self, user_id: i64, auth_key_id: i64, epoch: u64) -> Attached {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let lagged = Arc::new(AtomicBool::new(false));
        if let Ok(mut devices) = self.devices.lock() {
            devices.entry(user_id).or_default().push(Device {
                auth_key_id,
                epoch,
                tx,
                lagged: lagged.clone(),
            });
        }
        Attached { rx, lagged }
    }

    pub fn detach(&self, user_id: i64, auth_key_id: i64, epoch: u64) {
        if let Ok(mut devices) = self.devices.lock()
            && let Some(list) = devices.get_mut(&user_id)
        {
            list.retain(|d| !(d.auth_key_id == auth_key_id && d.epoch == epoch));
            if list.is_empty() {
                devices.remove(&user_id);
            }
        }
    }

    /// Ends every stream of a device (it logged out).
    pub fn disconnect_device(&self, auth_key_id: i64) {
        if let Ok(mut devices) = self.devices.lock() {
            for list in devices.values_mut() {
                list.retain(|d| d.auth_key_id != auth_key_id);
            }
            devices.retain(|_, list| !list.is_empty());
        }
    }

    /// Every attached stream as (user, auth key, epoch), for refreshing routes.
    pub fn attached(&self) -> Vec<(i64, i64, u64)> {
        self.devices
            .lock()
            .map(|devices| {
                devices
                    .iter()
                    .flat_map(|(user, list)| list.iter().map(|d| (*user, d.auth_key_id, d.epoch)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Offers a job to its user's streams here, except the device that made it; returns how
    /// many streams took it. A stream whose buffer is full is dropped as lagging: its client
    /// reconnects and catches up with getDifference.
    pub fn push(&self, job: &PushJob) -> usize {
        let Some(update) = job.update.clone() else {
            return 0;
        };
        let event = StreamEvent {
            kind: Some(stream_event::Kind::Update(update)),
        };
        let Ok(mut devices) = self.devices.lock() else {
            return 0;
        };
        let Some(list) = devices.get_mut(&job.user_id) else {
            return 0;
        };
        let mut delivered = 0;
        list.retain(|d| {
            if d.auth_key_id == job.origin_auth_key_id {
                return true;
            }
            match d.tx.try_send(event.clone()) {
                Ok(()) => {
                    delivered += 1;
                    true
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    d.lagged.store(true, Ordering::Relaxed);
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        delivered
    }
}

/// The internal push endpoint dispatch calls.
pub struct PushApi(pub Arc<Hub>);

#[tonic::async_trait]
impl GatewayPush for PushApi {
    async fn push(&self, request: Request<PushRequest>) -> Result<Response<PushResponse>, Status> {
        let delivered = request
            .into_inner()
            .jobs
            .iter()
            .map(|j| self.0.push(j))
            .sum::<usize>();
        Ok(Response::new(PushResponse {
            delivered: delivered as i32,
        }))
    }
}
