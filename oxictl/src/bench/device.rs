//! Bench devices: sign-up, and the online device that applies only contiguous pts and
//! fills persistent gaps with getDifference.

use super::*;

pub(super) type Signed = InterceptedService<Channel, SignWithKey>;

#[derive(Clone)]
pub(super) struct Dev {
    pub(super) channel: Signed,
}

impl Dev {
    pub(super) fn messages(&self) -> MessagesClient<Signed> {
        MessagesClient::new(self.channel.clone())
    }
    pub(super) fn updates(&self) -> UpdatesClient<Signed> {
        UpdatesClient::new(self.channel.clone())
    }
    pub(super) fn auth(&self) -> AuthClient<Signed> {
        AuthClient::new(self.channel.clone())
    }

    /// A new device: creates its auth key on `channel`.
    pub(super) async fn create(channel: Channel, model: &str) -> anyhow::Result<Self> {
        let key = unary(AuthClient::new(channel.clone()).create_auth_key(req(
            CreateAuthKeyRequest {
                device_model: model.into(),
            },
        )))
        .await
        .map_err(|c| anyhow!("CreateAuthKey: {c}"))?;
        Ok(Self {
            channel: InterceptedService::new(
                channel,
                SignWithKey::new(key.auth_key_id, &key.secret)?,
            ),
        })
    }

    /// Signs up (a new phone) or in; returns the user id.
    pub(super) async fn login(&self, phone: &str, sign_up: bool) -> anyhow::Result<i64> {
        let hash = unary(self.auth().send_code(req(SendCodeRequest {
            phone: phone.into(),
        })))
        .await
        .map_err(|c| anyhow!("SendCode: {c}"))?
        .phone_code_hash;
        let auth = if sign_up {
            unary(self.auth().sign_up(req(SignUpRequest {
                phone: phone.into(),
                phone_code_hash: hash,
                code: LOGIN_CODE.into(),
                first_name: "Bench".into(),
            })))
            .await
            .map_err(|c| anyhow!("SignUp: {c} (is the gateway started with OXIGRAM_GATEWAY__FIXED_LOGIN_CODE={LOGIN_CODE}?)"))?
        } else {
            unary(self.auth().sign_in(req(SignInRequest {
                phone: phone.into(),
                phone_code_hash: hash,
                code: LOGIN_CODE.into(),
            })))
            .await
            .map_err(|c| anyhow!("SignIn: {c}"))?
        };
        Ok(auth.user.context("no user in the authorization")?.id)
    }

    pub(super) async fn difference(&self, pts: i32) -> Result<Difference, String> {
        unary(self.updates().get_difference(req(GetDifferenceRequest {
            pts,
            limit: DIFF_LIMIT,
        })))
        .await
    }

    pub(super) async fn open_stream(&self, pts: i32) -> Result<Streaming<StreamEvent>, String> {
        // No grpc-timeout on a stream: only the opening is bounded.
        match tokio::time::timeout(RPC_DEADLINE, self.updates().stream(StreamRequest { pts })).await
        {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(error_code(&s)),
            Err(_) => Err("TIMEOUT".into()),
        }
    }

    /// Every update after `pts`, following slices (bounded).
    pub(super) async fn full_difference(&self, mut pts: i32) -> Result<Vec<PtsUpdate>, String> {
        let mut all = Vec::new();
        for _ in 0..100_000 {
            let d = self.difference(pts).await?;
            let state = d.state.ok_or("NO_STATE")?;
            if d.too_long {
                return Err("DIFFERENCE_TOO_LONG".into());
            }
            all.extend(d.updates);
            pts = state.pts;
            if !d.is_slice {
                return Ok(all);
            }
        }
        Err("TOO_MANY_SLICES".into())
    }
}

pub(super) struct BenchUser {
    pub(super) id: i64,
    pub(super) online: Dev,
    pub(super) offline: Option<Dev>,
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

// ---------------------------------------------------------------------------------------------
// The online device: applies only contiguous pts, fills persistent gaps with getDifference
// ---------------------------------------------------------------------------------------------

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

pub(super) struct DeviceState {
    pub(super) dev: Dev,
    pub(super) shared: Arc<Shared>,
    /// Pending updates above a gap, by pts.
    pub(super) pending: BTreeMap<i32, (PtsUpdate, Via)>,
    pub(super) gap_since: Option<Instant>,
    pub(super) r: DeviceReport,
}

impl DeviceState {
    pub(super) fn offer(&mut self, u: PtsUpdate, via: Via) {
        if u.pts <= self.r.pts {
            return; // already applied
        }
        if u.pts - u.pts_count == self.r.pts {
            self.apply(&u, via);
            self.drain_pending();
        } else {
            self.pending.insert(u.pts, (u, via));
            if self.gap_since.is_none() {
                self.gap_since = Some(Instant::now());
            }
        }
    }

    pub(super) fn drain_pending(&mut self) {
        let mut progressed = false;
        while let Some(entry) = self.pending.first_entry() {
            let (u, _) = entry.get();
            if u.pts <= self.r.pts {
                entry.remove();
            } else if u.pts - u.pts_count == self.r.pts {
                let (u, via) = entry.remove();
                self.apply(&u, via);
                progressed = true;
            } else {
                break;
            }
        }
        if self.pending.is_empty() {
            self.gap_since = None;
        } else if progressed || self.gap_since.is_none() {
            // A new gap: it gets its own wait.
            self.gap_since = Some(Instant::now());
        }
    }

    pub(super) fn apply(&mut self, u: &PtsUpdate, via: Via) {
        self.r.pts = u.pts;
        let Some(m) = new_message_of(u) else { return };
        let Some((seq, sent_us)) = parse_text(&self.shared.run, &m.text) else {
            return;
        };
        if m.out {
            match self.r.outgoing.get(&seq) {
                Some(&pts) if pts != u.pts => self.r.duplicates += 1,
                Some(_) => {}
                None => {
                    self.r.outgoing.insert(seq, u.pts);
                }
            }
            return;
        }
        match self.r.incoming.get(&seq) {
            Some(&(pts, _, _)) if pts != u.pts => self.r.duplicates += 1,
            Some(_) => {}
            None => {
                let latency = self.shared.now_us().saturating_sub(sent_us);
                self.r.incoming.insert(seq, (u.pts, latency, via));
                if let Ok(mut set) = self.shared.received.lock() {
                    set.insert(seq);
                }
            }
        }
    }

    /// getDifference from the applied pts until nothing is left.
    pub(super) async fn fill(&mut self, via: Via) {
        for _ in 0..1000 {
            let d = match self.dev.difference(self.r.pts).await {
                Ok(d) => d,
                Err(code) => {
                    self.r.errors.add("gap_fill", &code);
                    // Try again after another wait.
                    self.gap_since = Some(Instant::now());
                    return;
                }
            };
            let Some(state) = d.state else {
                self.r.errors.add("gap_fill", "NO_STATE");
                return;
            };
            if d.too_long {
                self.r.too_long += 1;
                self.r.pts = state.pts;
                break;
            }
            for u in &d.updates {
                if u.pts <= self.r.pts {
                    continue;
                }
                if u.pts - u.pts_count != self.r.pts {
                    self.r.discontinuities += 1;
                }
                self.apply(u, via);
            }
            self.r.pts = self.r.pts.max(state.pts);
            if !d.is_slice {
                break;
            }
        }
        self.drain_pending();
    }
}

/// Resolves once the bench says stop (or its sender is gone).
pub(super) async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

pub(super) async fn next_event(
    stream: &mut Option<Streaming<StreamEvent>>,
) -> Result<Option<StreamEvent>, Status> {
    match stream {
        Some(s) => s.message().await,
        None => std::future::pending().await,
    }
}

/// One online device: streams from pts 0, applies its own sends' answers, fills gaps; on stop,
/// makes one last getDifference and reports.
pub(super) async fn device_task(
    user: usize,
    dev: Dev,
    shared: Arc<Shared>,
    mut own: mpsc::UnboundedReceiver<PtsUpdate>,
    mut stop: watch::Receiver<bool>,
    ready: oneshot::Sender<Result<(), String>>,
) -> DeviceReport {
    let mut st = DeviceState {
        dev: dev.clone(),
        shared,
        pending: BTreeMap::new(),
        gap_since: None,
        r: DeviceReport {
            user,
            ..Default::default()
        },
    };
    let mut stream = match dev.open_stream(0).await {
        Ok(s) => Some(s),
        Err(code) => {
            let _ = ready.send(Err(code));
            return st.r;
        }
    };
    let _ = ready.send(Ok(()));
    let mut reconnect_at = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stopped(&mut stop) => break,
            Some(u) = own.recv() => st.offer(u, Via::Own),
            event = next_event(&mut stream) => match event {
                Ok(Some(StreamEvent { kind: Some(stream_event::Kind::Update(u)) })) => {
                    st.offer(u, Via::Stream);
                }
                Ok(Some(StreamEvent { kind: Some(stream_event::Kind::DifferenceNeeded(_)) })) => {
                    st.r.difference_needed += 1;
                    st.fill(Via::GapFill).await;
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    st.r.errors.add("stream", "ENDED");
                    stream = None;
                    reconnect_at = Instant::now() + Duration::from_millis(200);
                }
                Err(s) => {
                    st.r.errors.add("stream", &error_code(&s));
                    stream = None;
                    reconnect_at = Instant::now() + Duration::from_millis(200);
                }
            },
            _ = tick.tick() => {
                if st.gap_since.is_some_and(|t| t.elapsed() >= GAP_WAIT) {
                    st.r.gap_fills += 1;
                    st.fill(Via::GapFill).await;
                }
                if stream.is_none() && Instant::now() >= reconnect_at && st.r.reconnects < 50 {
                    st.r.reconnects += 1;
                    match dev.open_stream(st.r.pts).await {
                        Ok(s) => stream = Some(s),
                        Err(code) => {
                            st.r.errors.add("stream_open", &code);
                            reconnect_at = Instant::now() + Duration::from_secs(1);
                        }
                    }
                }
            }
        }
    }
    drop(stream);
    while let Ok(u) = own.try_recv() {
        st.offer(u, Via::Own);
    }
    st.fill(Via::Final).await;
    st.r
}
