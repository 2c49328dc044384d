//! Bench devices: sign-up, and the online device, whose ordering, gap filling and reconnection
//! are `oxigram_client::UpdateStream`'s; the bench only records what arrived, when and how.

use oxigram_client::{
    Client, During, Event, SentUpdates, Source, State, StreamOptions, UpdateStream,
};

use super::*;

/// A new device with its own auth key, on a shared connection.
pub(super) async fn new_device(channel: Channel, model: &str) -> anyhow::Result<Client> {
    let client = RPC
        .bound(Client::create(channel, model))
        .await
        .and_then(|created| created)
        .map_err(|e| anyhow!("CreateAuthKey: {}", e.code()))?;
    Ok(client.with_deadline(RPC_DEADLINE))
}

/// Signs up (a new phone) or in; returns the user id.
pub(super) async fn login(device: &Client, phone: &str, sign_up: bool) -> anyhow::Result<i64> {
    let code = device
        .request_code(phone)
        .await
        .map_err(|e| anyhow!("SendCode: {}", e.code()))?;
    let user = if sign_up {
        device
            .sign_up(&code, LOGIN_CODE, "Bench")
            .await
            .map_err(|e| anyhow!("SignUp: {} (is the gateway started with OXIGRAM_GATEWAY__FIXED_LOGIN_CODE={LOGIN_CODE}?)", e.code()))?
    } else {
        device
            .sign_in(&code, LOGIN_CODE)
            .await
            .map_err(|e| anyhow!("SignIn: {}", e.code()))?
    };
    Ok(user.id)
}

/// Every update after `pts`, following slices.
pub(super) async fn full_difference(device: &Client, pts: i32) -> Result<Vec<PtsUpdate>, String> {
    let (slices, _) = device.full_difference(pts).await.map_err(|e| e.code())?;
    Ok(slices.into_iter().flat_map(|d| d.updates).collect())
}

pub(super) struct BenchUser {
    pub(super) id: i64,
    pub(super) online: Client,
    pub(super) offline: Option<Client>,
}

/// A bench text: `bench <run> #<seq> @<µs since the bench's start of the send>`.
pub(super) fn bench_text(run: &str, seq: u64, sent_us: u64) -> String {
    format!("bench {run} #{seq} @{sent_us}")
}

pub(super) fn parse_text(run: &str, text: &str) -> Option<(u64, u64)> {
    let rest = text
        .strip_prefix("bench ")?
        .strip_prefix(run)?
        .strip_prefix(" #")?;
    let (seq, at) = rest.split_once(" @")?;
    Some((seq.parse().ok()?, at.parse().ok()?))
}

pub(super) fn new_message_of(u: &PtsUpdate) -> Option<&Message> {
    match u.update.as_ref()?.kind.as_ref()? {
        update::Kind::NewMessage(n) => n.message.as_ref(),
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Via {
    /// Pushed on the stream.
    Stream,
    /// The device's own send (the SendMessage answer).
    Own,
    /// A gap fill (or DifferenceNeeded) during the run.
    GapFill,
    /// The device's last getDifference after the grace period.
    Final,
}

pub(super) struct Shared {
    pub(super) run: String,
    pub(super) t0: Instant,
    /// The wall clock at t0, to date stall episodes.
    pub(super) wall0: chrono::DateTime<chrono::Utc>,
    /// Bench messages some recipient's online device applied (seq), for the grace wait.
    pub(super) received: Mutex<HashSet<u64>>,
}

impl Shared {
    pub(super) fn now_us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }
}

#[derive(Default)]
pub(super) struct DeviceReport {
    pub(super) user: usize,
    pub(super) pts: i32,
    /// Incoming bench messages applied: seq → (pts, latency µs, via).
    pub(super) incoming: HashMap<u64, (i32, u64, Via)>,
    /// Outgoing bench messages applied: seq → pts.
    pub(super) outgoing: HashMap<u64, i32>,
    pub(super) duplicates: u64,
    pub(super) gap_fills: u64,
    pub(super) difference_needed: u64,
    pub(super) reconnects: u64,
    pub(super) discontinuities: u64,
    pub(super) too_long: u64,
    pub(super) errors: Errors,
}

impl DeviceReport {
    /// Records one applied update: a bench message's latency on first arrival, or a duplicate
    /// when its text arrives again at another pts.
    pub(super) fn apply(&mut self, u: &PtsUpdate, via: Via, shared: &Shared) {
        let Some(m) = new_message_of(u) else { return };
        let Some((seq, sent_us)) = parse_text(&shared.run, &m.text) else {
            return;
        };
        if m.out {
            match self.outgoing.get(&seq) {
                Some(&pts) if pts != u.pts => self.duplicates += 1,
                Some(_) => {}
                None => {
                    self.outgoing.insert(seq, u.pts);
                }
            }
            return;
        }
        match self.incoming.get(&seq) {
            Some(&(pts, _, _)) if pts != u.pts => self.duplicates += 1,
            Some(_) => {}
            None => {
                let latency = shared.now_us().saturating_sub(sent_us);
                self.incoming.insert(seq, (u.pts, latency, via));
                if let Ok(mut set) = shared.received.lock() {
                    set.insert(seq);
                }
            }
        }
    }

    /// Records one event of the stream; `by_difference` names what a getDifference brought.
    fn note(&mut self, event: Event, by_difference: Via, shared: &Shared) {
        match event {
            Event::Update(a) => {
                let via = match a.source {
                    Source::Stream => Via::Stream,
                    Source::Sent => Via::Own,
                    Source::Difference => by_difference,
                };
                self.apply(&a.update, via, shared);
            }
            Event::Failed { during, error } => {
                let phase = match during {
                    During::Stream => "stream",
                    During::Reconnect => "stream_open",
                    During::CatchUp => "gap_fill",
                };
                self.errors.add(phase, &error.code());
            }
            Event::Gap { .. }
            | Event::TooLong { .. }
            | Event::Resumed { .. }
            | Event::Paced { .. }
            | Event::Typing(_)
            | Event::Status(_)
            | Event::User(_) => {}
        }
    }
}

/// Resolves once the bench says stop (or its sender is gone).
pub(super) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// One online device: streams from pts 0, applies its own sends' answers, fills gaps; on stop,
/// makes one last getDifference and reports.
pub(super) async fn device_task(
    user: usize,
    device: Client,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    ready: oneshot::Sender<Result<SentUpdates, String>>,
) -> DeviceReport {
    let mut r = DeviceReport {
        user,
        ..Default::default()
    };
    let options = StreamOptions {
        gap_wait: GAP_WAIT,
        first_retry: Duration::from_millis(200),
        max_retry: Duration::from_secs(1),
        max_reconnects: Some(50),
    };
    let mut updates = match UpdateStream::open(device, State::default(), options).await {
        Ok(updates) => updates,
        Err(e) => {
            let _ = ready.send(Err(e.code()));
            return r;
        }
    };
    let _ = ready.send(Ok(updates.sent()));
    loop {
        tokio::select! {
            () = stopped(&mut stop) => break,
            event = updates.next() => r.note(event, Via::GapFill, &shared),
        }
    }
    updates.stop();
    while let Some(event) = updates.try_next() {
        r.note(event, Via::GapFill, &shared);
    }
    updates.catch_up().await;
    while let Some(event) = updates.try_next() {
        r.note(event, Via::Final, &shared);
    }
    let stats = updates.stats();
    r.pts = updates.state().pts;
    r.gap_fills = stats.gap_fills;
    r.difference_needed = stats.difference_needed;
    r.reconnects = stats.reconnects;
    r.discontinuities = stats.discontinuities;
    r.too_long = stats.too_long;
    r
}
