//! The client's Updates service: state, difference (messages in their current state) and the
//! live stream, which opens at the client's pts, replays what the device missed, then goes live.

use std::{
    collections::HashSet,
    pin::Pin,
    sync::{Arc, atomic::Ordering},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use futures::{Stream, StreamExt};
use oxigram_errors::forward;
use oxigram_proto::{
    api::v1::{
        AckRequest, CaughtUp, DeviceState, Difference, DifferenceNeeded, GetDeviceStateRequest,
        GetDifferenceRequest, GetMessagesRequest, GetStateRequest, RetryAfter, StreamEvent,
        StreamRequest, stream_event, updates_server::Updates,
    },
    types::v1::{UpdatesState, update},
    updates::v1 as updates_svc,
};
use oxigram_routes::Route;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::{
    Gateway, accounts,
    catch_up::Entry,
    hub::Pushed,
    transient::{self, now_ms},
};

/// How many missed updates a stream replays before asking for getDifference instead.
const STREAM_REPLAY_LIMIT: i32 = 100;

pub struct UpdatesApi(pub Arc<Gateway>);

impl Gateway {
    /// The user's difference, with the messages it names in their current state.
    pub async fn difference(
        &self,
        user_id: i64,
        request: GetDifferenceRequest,
    ) -> Result<Difference, Status> {
        let request = updates_svc::GetDifferenceRequest {
            user_id,
            request: Some(request),
        };
        let difference = self.updates.clone().get_difference(request).await;
        let mut difference = difference.map_err(forward)?.into_inner();
        // The messages the slice's new messages and edits name, as they are now: fetched at
        // once; a deleted one is not among them.
        let named = |kind: &update::Kind| match kind {
            update::Kind::NewMessage(n) => n.message.as_ref().map(|m| m.id),
            update::Kind::EditMessage(e) => e.message.as_ref().map(|m| m.id),
            _ => None,
        };
        let mut ids: Vec<i64> = difference
            .updates
            .iter()
            .filter_map(|u| u.update.as_ref()?.kind.as_ref().and_then(named))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let current = self
            .messages_by_ids(user_id, GetMessagesRequest { ids })
            .await?;
        let alive: HashSet<i64> = current.iter().map(|m| m.id).collect();
        let mut new_ids = HashSet::new();
        for u in &mut difference.updates {
            let message = match u.update.as_mut().and_then(|u| u.kind.as_mut()) {
                Some(update::Kind::NewMessage(n)) => {
                    if let Some(m) = &n.message {
                        new_ids.insert(m.id);
                    }
                    &mut n.message
                }
                Some(update::Kind::EditMessage(e)) => &mut e.message,
                _ => continue,
            };
            // A message deleted since never shows again, not even as the update logged it.
            if message.as_ref().is_some_and(|m| !alive.contains(&m.id)) {
                *message = None;
            }
        }
        difference.new_messages = current
            .into_iter()
            .filter(|m| new_ids.contains(&m.id))
            .collect();
        Ok(difference)
    }
}

fn epoch_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or_default()
}

pub(crate) type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, Status>> + Send>>;

#[tonic::async_trait]
impl Updates for UpdatesApi {
    async fn get_state(
        &self,
        request: Request<GetStateRequest>,
    ) -> Result<Response<UpdatesState>, Status> {
        let (me, _) = self.0.signed_in(request).await?;
        let request = updates_svc::GetStateRequest {
            user_id: me.user_id,
        };
        self.0
            .updates
            .clone()
            .get_state(request)
            .await
            .map_err(forward)
    }

    async fn get_difference(
        &self,
        request: Request<GetDifferenceRequest>,
    ) -> Result<Response<Difference>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let limits = &self.0.limits;
        limits
            .check(
                &limits.difference_per_device,
                me.auth_key_id,
                "too many getDifference calls",
            )
            .await?;
        // A call waits in line no longer than a device turned away would wait at least.
        let catch_ups = &self.0.catch_ups;
        let turned_away = |wait: Duration| {
            let seconds = wait.as_millis().div_ceil(1000).max(1) as u32;
            Status::from(oxigram_errors::Error::new(
                oxigram_errors::ErrorCode::FloodWait(seconds),
                "this gateway is catching up as many devices as it takes at once",
            ))
        };
        let entry = catch_ups.enter().map_err(turned_away)?;
        let _slot = catch_ups
            .slot_within(
                entry,
                Duration::from_millis(self.0.config.streams.retry_after_ms),
            )
            .await
            .map_err(turned_away)?;
        let mut difference = self.0.difference(me.user_id, request).await?;
        crate::metrics::difference(difference.updates.len());
        difference.users = self
            .0
            .users_of(me.user_id, &difference.new_messages, &[])
            .await?;
        Ok(Response::new(difference))
    }

    async fn ack(&self, request: Request<AckRequest>) -> Result<Response<DeviceState>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let (user_id, pts) = (me.user_id, request.pts);
        let current = self
            .0
            .updates
            .clone()
            .get_state(updates_svc::GetStateRequest { user_id })
            .await
            .map_err(forward)?
            .into_inner()
            .pts;
        if pts < 0 || pts > current {
            return Err(oxigram_errors::Error::new(
                oxigram_errors::ErrorCode::PtsInvalid,
                "a device acknowledges only pts it can have applied",
            )
            .into());
        }
        let acked_pts = accounts::ack_pts(&self.0.pool, me.auth_key_id, user_id, pts)
            .await
            .map_err(oxigram_errors::Error::from)?;
        Ok(Response::new(DeviceState { acked_pts }))
    }

    async fn get_device_state(
        &self,
        request: Request<GetDeviceStateRequest>,
    ) -> Result<Response<DeviceState>, Status> {
        let (me, _) = self.0.signed_in(request).await?;
        let acked_pts = accounts::acked_pts(&self.0.pool, me.auth_key_id, me.user_id)
            .await
            .map_err(oxigram_errors::Error::from)?;
        Ok(Response::new(DeviceState { acked_pts }))
    }

    type StreamStream = EventStream;

    async fn stream(
        &self,
        request: Request<StreamRequest>,
    ) -> Result<Response<Self::StreamStream>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let (user_id, from_pts) = (me.user_id, request.pts);
        if from_pts < 0 {
            return Err(oxigram_errors::Error::new(
                oxigram_errors::ErrorCode::PtsInvalid,
                "pts must not be negative",
            )
            .into());
        }
        // A resumed stream replays what its device missed: one catch-up, paced in a storm. A
        // live stream (pts 0) replays nothing and is never turned away. An opening turned away
        // is told its turn before its limit is counted: it cost nothing, and a device that
        // comes back when told is not the one to run out of openings.
        let entry = if from_pts > 0 {
            match self.0.catch_ups.enter() {
                Ok(entry) => Some(entry),
                Err(wait) => return Ok(Response::new(retry_after(wait))),
            }
        } else {
            None
        };
        let limits = &self.0.limits;
        limits
            .check(
                &limits.stream_opens_per_device,
                me.auth_key_id,
                "too many streams opened",
            )
            .await?;
        let gateway = self.0.clone();
        let auth_key_id = me.auth_key_id;
        let (out, out_rx) = mpsc::channel(64);
        let out = Out(out);
        let open = crate::metrics::stream_opened();
        // A stream that has its slot (or needs none) is attached before it is answered, so
        // what is pushed from then on reaches it; one in line is attached once its turn
        // comes, before its replay reads the log.
        let joined = match &entry {
            Some(Entry::Line(_)) => None,
            _ => Some(join(&gateway, user_id, auth_key_id).await),
        };
        tokio::spawn(async move {
            let slot = match entry {
                None => None,
                Some(entry) => match Box::pin(wait_for_slot(&gateway, entry, &out)).await {
                    Some(slot) => Some(slot),
                    None => return,
                },
            };
            // Boxed, as the wait: a stream's task is sized for its largest state for as long
            // as the stream lasts, and the route's registration happens once.
            let (attached, route) = match joined {
                Some(joined) => joined,
                None => Box::pin(join(&gateway, user_id, auth_key_id)).await,
            };
            run_stream(&gateway, user_id, from_pts, slot, attached, &out).await;
            drop(open);
            let last = gateway.hub.detach(user_id, auth_key_id, route.epoch);
            if let Err(err) = Box::pin(gateway.routes.unregister(user_id, &route)).await {
                tracing::warn!(error = %err, "cannot remove the device route; it will expire");
            }
            if last {
                gateway.presence.last_stream_closed(user_id);
            }
        });
        let events =
            ReceiverStream::new(out_rx).map(|sent: Outgoing| sent.map(|e| *e).map_err(|s| *s));
        Ok(Response::new(Box::pin(events)))
    }
}

/// What a stream's task hands its response.
type Outgoing = Result<Box<StreamEvent>, Box<Status>>;

/// The way from a stream's task to its response. A channel holds a block of slots from the
/// moment it opens, however idle its stream, so each slot is a box: an idle stream costs a
/// pointer a slot rather than a whole event.
struct Out(mpsc::Sender<Outgoing>);

impl Out {
    /// Sends an event; false when the client went away.
    async fn event(&self, event: impl Into<Box<StreamEvent>>) -> bool {
        self.0.send(Ok(event.into())).await.is_ok()
    }

    /// Ends the stream with an error.
    async fn error(&self, status: Status) {
        // The client may be gone already; then nobody is left to tell.
        let _ = self.0.send(Err(Box::new(status))).await;
    }

    /// Resolves when the client went away.
    async fn closed(&self) {
        self.0.closed().await
    }
}

/// A stream of one event, the wait before reopening it, then its end.
fn retry_after(wait: Duration) -> EventStream {
    let event = StreamEvent {
        kind: Some(stream_event::Kind::RetryAfter(RetryAfter {
            retry_after_ms: wait.as_millis().min(u32::MAX as u128) as u32,
        })),
    };
    Box::pin(futures::stream::iter([Ok(event)]))
}

/// Attaches a device's stream to the hub and registers its route: from here on what is
/// pushed to the device reaches this stream.
async fn join(gateway: &Gateway, user_id: i64, auth_key_id: i64) -> (crate::hub::Attached, Route) {
    let epoch = epoch_now();
    // Attached before the replay reads the log, so nothing committed meanwhile slips between
    // the two.
    let attached = gateway.hub.attach(user_id, auth_key_id, epoch);
    let route = Route {
        auth_key_id,
        epoch,
        push_endpoint: gateway.push_endpoint.clone(),
    };
    if let Err(err) = gateway.routes.register(user_id, &route).await {
        // Degraded: no pushes reach this device until Redis is back (the route keeper then
        // registers it); getDifference still works.
        tracing::warn!(error = %err, "cannot register the device route");
        gateway.routes_dirty.store(true, Ordering::Relaxed);
    }
    gateway.presence.stream_opened(user_id);
    (attached, route)
}

/// A resumed stream's catch-up slot, once its turn in line comes; None when the client went
/// away or the gateway shuts down first (the place is given up).
async fn wait_for_slot(
    gateway: &Gateway,
    entry: Entry,
    out: &Out,
) -> Option<crate::catch_up::Slot> {
    tokio::select! {
        slot = gateway.catch_ups.slot(entry) => slot,
        _ = out.closed() => None,
        _ = gateway.shutdown.cancelled() => None,
    }
}

fn difference_needed() -> StreamEvent {
    StreamEvent {
        kind: Some(stream_event::Kind::DifferenceNeeded(DifferenceNeeded {})),
    }
}

/// How often a stream pulls its user's log while this instance cannot reach Redis (its routes
/// may be missing, so dispatch's pushes may not find it); the client's own gap rule would
/// otherwise notice only at its next update.
const PULL_WHILE_ROUTES_FAIL: Duration = Duration::from_secs(1);
/// Most pages of the log one pull sends: a bound on what one tick costs the updates service,
/// well above what a device's log gains in a tick under a heavy send load.
const PULL_PAGES_PER_TICK: usize = 10;

/// What a stream has sent of its user's log: every update with `floor < pts <= through` went
/// out on it, so a push of one of them again (dispatch delivering what a pull already sent)
/// is left out.
#[derive(Clone, Copy)]
struct Sent {
    floor: i32,
    through: i32,
}

impl Sent {
    fn already(&self, pts: i32) -> bool {
        pts > self.floor && pts <= self.through
    }

    /// A pushed update went out: it extends the range when it continues it.
    fn pushed(&mut self, pts: i32, pts_count: i32) {
        if pts - pts_count == self.through {
            self.through = pts;
        }
    }
}

/// One pull of the log after `sent` (or, knowing nothing yet, from the user's current state):
/// sends what it finds, page after page while the log holds more, so a device whose log grows
/// faster than one page a tick still keeps up; false when the client went away.
async fn pull(gateway: &Gateway, user_id: i64, sent: &mut Option<Sent>, out: &Out) -> bool {
    let Some(mut from) = *sent else {
        // A stream opened live (pts 0) has sent nothing it can vouch for: the pulls start at
        // the log's current end, what came before is the client's to fetch.
        let state = gateway
            .updates
            .clone()
            .get_state(updates_svc::GetStateRequest { user_id })
            .await;
        if let Ok(state) = state {
            let pts = state.into_inner().pts;
            *sent = Some(Sent {
                floor: pts,
                through: pts,
            });
        }
        return true;
    };
    for _ in 0..PULL_PAGES_PER_TICK {
        let request = GetDifferenceRequest {
            pts: from.through,
            limit: STREAM_REPLAY_LIMIT,
        };
        let diff = match gateway.difference(user_id, request).await {
            Ok(diff) => diff,
            Err(status) => {
                tracing::debug!(%status, "a stream's pull failed; it pulls again at its next tick");
                return true;
            }
        };
        if diff.too_long {
            *sent = None;
            return out.event(difference_needed()).await;
        }
        for u in diff.updates {
            if u.pts <= from.through {
                continue;
            }
            let event = StreamEvent {
                kind: Some(stream_event::Kind::Update(u)),
            };
            if !out.event(event).await {
                return false;
            }
        }
        let Some(state) = diff.state else {
            return true;
        };
        from = Sent {
            floor: from.floor,
            through: state.pts.max(from.through),
        };
        *sent = Some(from);
        if !diff.is_slice {
            return true;
        }
    }
    true
}

/// Sleeps until `at`; never, without one.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// How a resumed stream's replay went.
enum Replayed {
    /// The updates and the `CaughtUp` marker were sent, up to this pts.
    Through(i32),
    /// Too much was missed for a stream: the device was told to call getDifference.
    DifferenceNeeded,
    /// The stream ended: its client went away, or it was sent an error.
    Ended,
}

/// Sends a resumed stream what its device missed since `from_pts`.
async fn replay(gateway: &Gateway, user_id: i64, from_pts: i32, out: &Out) -> Replayed {
    let request = GetDifferenceRequest {
        pts: from_pts,
        limit: STREAM_REPLAY_LIMIT,
    };
    match gateway.difference(user_id, request).await {
        Ok(diff) if diff.too_long || diff.is_slice => match out.event(difference_needed()).await {
            true => Replayed::DifferenceNeeded,
            false => Replayed::Ended,
        },
        Ok(diff) => {
            let through = diff.state.map_or(from_pts, |s| s.pts);
            for u in diff.updates {
                let event = StreamEvent {
                    kind: Some(stream_event::Kind::Update(u)),
                };
                if !out.event(event).await {
                    return Replayed::Ended;
                }
            }
            let caught_up = StreamEvent {
                kind: Some(stream_event::Kind::CaughtUp(CaughtUp { pts: through })),
            };
            match out.event(caught_up).await {
                true => Replayed::Through(through),
                false => Replayed::Ended,
            }
        }
        Err(status) => {
            out.error(status).await;
            Replayed::Ended
        }
    }
}

/// Feeds one device's stream until the client goes away, the device logs out, it sent nothing
/// for `streams.idle_timeout_secs`, or shutdown. Updates come by push; while this instance cannot reach Redis the stream also pulls them
/// from the log every [`PULL_WHILE_ROUTES_FAIL`], so its device keeps up during the outage.
async fn run_stream(
    gateway: &Gateway,
    user_id: i64,
    from_pts: i32,
    catch_up: Option<crate::catch_up::Slot>,
    mut attached: crate::hub::Attached,
    out: &Out,
) {
    // Live updates up to here were already sent by the replay.
    let mut replayed_up_to = 0;
    let mut sent: Option<Sent> = None;
    if from_pts > 0 {
        // Boxed, as the pulls and the route's removal: a stream's task is allocated at the size
        // of its largest state for as long as the stream lasts, and these happen once or
        // seldom, so an idle stream need not carry their room (they took most of it).
        match Box::pin(replay(gateway, user_id, from_pts, out)).await {
            Replayed::Through(through) => {
                replayed_up_to = through;
                // The client had everything up to its pts, and the replay sent the rest.
                sent = Some(Sent { floor: 0, through });
            }
            Replayed::DifferenceNeeded => {}
            Replayed::Ended => return,
        }
    }
    // Replayed: the slot is free for the next resumed stream.
    drop(catch_up);
    let mut pulls = tokio::time::interval(PULL_WHILE_ROUTES_FAIL);
    pulls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let idle_timeout = Duration::from_secs(gateway.config.streams.idle_timeout_secs);
    let idle_after =
        || (!idle_timeout.is_zero()).then(|| tokio::time::Instant::now() + idle_timeout);
    let mut idle_at = idle_after();
    loop {
        tokio::select! {
            () = until(idle_at) => {
                tracing::debug!(user_id, "an idle stream ends; its client reopens it");
                return;
            }
            _ = pulls.tick() => {
                if gateway.routes_failing.load(Ordering::Relaxed) {
                    if !Box::pin(pull(gateway, user_id, &mut sent, out)).await {
                        return;
                    }
                    // Pulling for its device: not idle.
                    idle_at = idle_after();
                }
            }
            event = attached.rx.recv() => match event {
                Some(Pushed::Logged(event)) => {
                    if let Some(stream_event::Kind::Update(u)) = &event.kind {
                        if u.pts <= replayed_up_to || sent.is_some_and(|s| s.already(u.pts)) {
                            continue;
                        }
                        if let Some(s) = sent.as_mut() {
                            s.pushed(u.pts, u.pts_count);
                        }
                    }
                    if !out.event(event).await {
                        return;
                    }
                    idle_at = idle_after();
                }
                Some(Pushed::Transient { event, made_at_ms }) => {
                    let Some(event) = transient::on_time(*event, now_ms() - made_at_ms) else {
                        continue;
                    };
                    if !out.event(event).await {
                        return;
                    }
                    idle_at = idle_after();
                }
                None => {
                    if attached.lagged.load(Ordering::Relaxed) {
                        // Ending either way: whether the client is still there to tell does
                        // not matter.
                        let _ = out.event(difference_needed()).await;
                    }
                    return;
                }
            },
            _ = out.closed() => return,
            _ = gateway.shutdown.cancelled() => return,
        }
    }
}
