//! The online devices of this gateway instance: one bounded channel per open update stream,
//! and the GatewayPush service through which dispatch delivers logged updates to them and
//! other gateway instances deliver transient events (typing, presence).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use oxigram_proto::{
    api::v1::{StreamEvent, stream_event},
    gateway::v1::{
        PushRequest, PushResponse, PushTransientRequest, TransientEvent,
        gateway_push_server::GatewayPush, transient_event,
    },
    types::v1::PushJob,
};
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

/// Updates a stream may have waiting before it counts as lagging.
pub const STREAM_BUFFER: usize = 1024;
/// Free room a stream's buffer must have to take a transient event: a busy stream drops them
/// (they describe a present the next one replaces), so they never make a stream lag.
const TRANSIENT_ROOM: usize = STREAM_BUFFER / 4;
/// Transient events offered at once before the offering pauses: a presence change fans out to
/// many streams, whose writes then come in small waves between other work instead of one
/// burst that sends queue behind.
const TRANSIENT_WAVE: usize = 100;
const TRANSIENT_WAVE_PAUSE: Duration = Duration::from_millis(1);

/// What waits in a stream's buffer.
pub enum Pushed {
    /// A logged update (or an instruction about the log): delivered, or the stream lags.
    /// Boxed, as a transient's event: a stream's channel holds a block of slots however
    /// idle it is, so a slot stays small.
    Logged(Box<StreamEvent>),
    /// A transient event, made at `made_at_ms` (Unix milliseconds): the stream drops it when
    /// late.
    Transient {
        event: Box<StreamEvent>,
        made_at_ms: i64,
    },
}

struct Device {
    auth_key_id: i64,
    epoch: u64,
    tx: mpsc::Sender<Pushed>,
    lagged: Arc<AtomicBool>,
}

/// One attached stream, as its owner task sees it.
pub struct Attached {
    pub rx: mpsc::Receiver<Pushed>,
    /// Set when the hub dropped the stream because its buffer was full.
    pub lagged: Arc<AtomicBool>,
}

/// Shards of the hub's table, each behind its own lock: attaching, detaching and pushing touch
/// only the shard of their user, so a reconnect storm's attaches and a push batch's offers
/// seldom wait on each other.
const SHARDS: usize = 64;

type Shard = Mutex<HashMap<i64, Vec<Device>>>;

pub struct Hub {
    shards: Box<[Shard]>,
}

impl Default for Hub {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

impl Hub {
    /// The shard holding a user's streams.
    fn shard(&self, user_id: i64) -> &Shard {
        &self.shards[user_id.rem_euclid(SHARDS as i64) as usize]
    }

    pub fn attach(&self, user_id: i64, auth_key_id: i64, epoch: u64) -> Attached {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let lagged = Arc::new(AtomicBool::new(false));
        if let Ok(mut devices) = self.shard(user_id).lock() {
            devices.entry(user_id).or_default().push(Device {
                auth_key_id,
                epoch,
                tx,
                lagged: lagged.clone(),
            });
        }
        Attached { rx, lagged }
    }

    /// Removes one stream; true when the user has no stream left here.
    pub fn detach(&self, user_id: i64, auth_key_id: i64, epoch: u64) -> bool {
        let Ok(mut devices) = self.shard(user_id).lock() else {
            return false;
        };
        let Some(list) = devices.get_mut(&user_id) else {
            return true;
        };
        list.retain(|d| !(d.auth_key_id == auth_key_id && d.epoch == epoch));
        if list.is_empty() {
            devices.remove(&user_id);
            return true;
        }
        false
    }

    /// Offers transient events in waves (see `TRANSIENT_WAVE`); returns how many streams took
    /// one.
    pub async fn push_transient_paced(&self, events: &[TransientEvent]) -> usize {
        let mut delivered = 0;
        for (i, wave) in events.chunks(TRANSIENT_WAVE).enumerate() {
            if i > 0 {
                tokio::time::sleep(TRANSIENT_WAVE_PAUSE).await;
            }
            delivered += wave.iter().map(|e| self.push_transient(e)).sum::<usize>();
        }
        delivered
    }

    /// Offers a transient event to every stream of its user here that has room for it;
    /// returns how many took it. A full stream simply misses it: it is not lagging for that.
    pub fn push_transient(&self, event: &TransientEvent) -> usize {
        let kind = match &event.kind {
            Some(transient_event::Kind::UserTyping(t)) => stream_event::Kind::UserTyping(*t),
            Some(transient_event::Kind::UserStatus(s)) => stream_event::Kind::UserStatus(*s),
            Some(transient_event::Kind::User(u)) => stream_event::Kind::User(u.clone()),
            None => return 0,
        };
        let Ok(devices) = self.shard(event.user_id).lock() else {
            return 0;
        };
        let Some(list) = devices.get(&event.user_id) else {
            return 0;
        };
        list.iter()
            .filter(|d| d.tx.capacity() > TRANSIENT_ROOM)
            .filter(|d| {
                let pushed = Pushed::Transient {
                    event: Box::new(StreamEvent {
                        kind: Some(kind.clone()),
                    }),
                    made_at_ms: event.made_at_ms,
                };
                d.tx.try_send(pushed).is_ok()
            })
            .count()
    }

    /// Ends every stream of a user (she was banned): dropping a stream's sender ends it.
    pub fn disconnect_user(&self, user_id: i64) {
        if let Ok(mut devices) = self.shard(user_id).lock() {
            devices.remove(&user_id);
        }
    }

    /// Ends every stream of a device (it logged out). Rare: it visits every shard, one at a
    /// time.
    pub fn disconnect_device(&self, auth_key_id: i64) {
        for shard in &self.shards {
            if let Ok(mut devices) = shard.lock() {
                for list in devices.values_mut() {
                    list.retain(|d| d.auth_key_id != auth_key_id);
                }
                devices.retain(|_, list| !list.is_empty());
            }
        }
    }

    /// Every attached stream as (user, auth key, epoch), for refreshing routes; each shard's
    /// lock is held only while copying that shard.
    pub fn attached(&self) -> Vec<(i64, i64, u64)> {
        let mut attached = Vec::new();
        for shard in &self.shards {
            if let Ok(devices) = shard.lock() {
                attached.extend(
                    devices.iter().flat_map(|(user, list)| {
                        list.iter().map(|d| (*user, d.auth_key_id, d.epoch))
                    }),
                );
            }
        }
        attached
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
        let Ok(mut devices) = self.shard(job.user_id).lock() else {
            return 0;
        };
        let Some(list) = devices.get_mut(&job.user_id) else {
            return 0;
        };
        let (mut delivered, mut lagged, mut closed) = (0, 0, 0);
        list.retain(|d| {
            if d.auth_key_id == job.origin_auth_key_id {
                return true;
            }
            match d.tx.try_send(Pushed::Logged(Box::new(event.clone()))) {
                Ok(()) => {
                    delivered += 1;
                    true
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    d.lagged.store(true, Ordering::Relaxed);
                    lagged += 1;
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    closed += 1;
                    false
                }
            }
        });
        crate::metrics::pushes("delivered", delivered as u64);
        crate::metrics::pushes("lagged", lagged);
        crate::metrics::pushes("closed", closed);
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

    async fn push_transient(
        &self,
        request: Request<PushTransientRequest>,
    ) -> Result<Response<PushResponse>, Status> {
        let events = request.into_inner().events;
        let delivered = self.0.push_transient_paced(&events).await;
        Ok(Response::new(PushResponse {
            delivered: delivered as i32,
        }))
    }
}

#[cfg(test)]
mod tests {
    use oxigram_proto::types::v1::PtsUpdate;

    use super::*;

    fn job(user_id: i64, origin_auth_key_id: i64) -> PushJob {
        PushJob {
            user_id,
            origin_auth_key_id,
            update: Some(PtsUpdate {
                pts: 1,
                pts_count: 1,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn streams_of_users_in_every_shard_are_found_pushed_and_detached() {
        let hub = Hub::default();
        // Users spread over every shard, two devices each; negative ids too.
        let users: Vec<i64> = (-(SHARDS as i64)..SHARDS as i64 * 2).collect();
        let mut attached: Vec<Attached> = Vec::new();
        for user in &users {
            attached.push(hub.attach(*user, user * 10, 1));
            attached.push(hub.attach(*user, user * 10 + 1, 1));
        }
        assert_eq!(hub.attached().len(), users.len() * 2);
        // A push reaches the user's other device only, whatever her shard.
        for user in &users {
            assert_eq!(hub.push(&job(*user, user * 10)), 1, "user {user}");
        }
        // Detaching the first device leaves the second; the last one empties the user.
        for user in &users {
            assert!(!hub.detach(*user, user * 10, 1));
            assert!(hub.detach(*user, user * 10 + 1, 1));
        }
        assert!(hub.attached().is_empty());
        // Each user's second device got exactly her push.
        let got = attached
            .iter_mut()
            .map(|a| matches!(a.rx.try_recv(), Ok(Pushed::Logged(_))))
            .filter(|got| *got)
            .count();
        assert_eq!(got, users.len());
    }

    #[test]
    fn a_logged_out_device_leaves_every_shard() {
        let hub = Hub::default();
        let _streams: Vec<Attached> = (0..SHARDS as i64 * 2)
            .map(|user| hub.attach(user, 7, user as u64))
            .collect();
        hub.attach(5, 8, 1);
        hub.disconnect_device(7);
        assert_eq!(hub.attached(), vec![(5, 8, 1)]);
    }
}
