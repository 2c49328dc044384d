//! The fault suite: one system, each service its own process, under a steady two-way load
//! sent through the client library (every `random_id` recorded, every failed send retried
//! with the same id until it is acknowledged), meets one fault after another: each service
//! killed with SIGKILL and restarted, Redis killed and restarted empty, Redis hanging for 10 s
//! (a proxy that stops forwarding), FLUSHALL, and Postgres restarted with
//! `pg_ctl restart -m immediate`.
//!
//! After each fault, every acknowledged send is in both owners' histories exactly once and on
//! each of the four devices (two follow the live stream with `UpdateStream`, two catch up by
//! getDifference), every device applied its log contiguously up to the server's pts, the
//! unread counts equal the messages received (nobody reads), and every device held all of it
//! within 5 s of the recovery; while Redis hangs, sends go on at no less than half their rate
//! before, and the streamed devices keep up (their streams pull the log while pushes cannot
//! find them). Each fault prints one line of figures (`--no-capture` shows them).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicI64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;
use oxigram::Target;
use oxigram_client::{Client, Event, Mirror, Sequencer, State, StreamOptions, UpdateStream};
use oxigram_proto::{
    api::v1::{GetDialogsRequest, GetHistoryRequest, SendMessageRequest},
    types::v1::{InputPeer, PtsUpdate},
};
use oxigram_tests::{
    Mode, System, private_infra,
    proxy::{HangingProxy, split_redis_url},
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Concurrent senders per user.
const SENDERS_PER_USER: usize = 2;
/// The load's rate before a fault is measured over this long.
const STEADY: Duration = Duration::from_secs(2);
/// How long Redis hangs.
const HANG: Duration = Duration::from_secs(10);
/// The load goes on this long after the recovery, then stops; the devices must then hold
/// every acknowledged send.
const AFTER: Duration = Duration::from_secs(1);
/// Every device holds everything acknowledged within this long of the recovery.
const CONVERGE_WITHIN: Duration = Duration::from_secs(5);
/// How long a device is waited for before the suite gives up on it (past the promise, to
/// measure how late it is).
const GIVE_UP_AFTER: Duration = Duration::from_secs(30);
/// While Redis is away, a streamed device holds every send acknowledged this long ago: its
/// stream pulls the log every second instead of waiting for pushes.
const PULLED_WITHIN: Duration = Duration::from_secs(3);
/// A send that keeps failing this long fails the suite.
const RETRY_FOR: Duration = Duration::from_secs(60);
/// Each call's deadline: a hung call is abandoned and retried.
const CALL_DEADLINE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// SIGKILL, then a start of the same service.
    Kill(Target),
    /// SIGKILL, then a start on the same port: empty, every connection broken.
    RedisKill,
    /// The proxy between the services and Redis stops forwarding for [`HANG`].
    RedisHang,
    /// FLUSHALL: empty, connections intact.
    RedisFlush,
    /// `pg_ctl restart -m immediate`: every connection drops mid-statement.
    PostgresRestart,
}

impl Fault {
    fn name(&self) -> String {
        match self {
            Self::Kill(target) => format!("kill -9 {}", target.name()),
            Self::RedisKill => "kill -9 Redis".into(),
            Self::RedisHang => format!("Redis hangs {} s", HANG.as_secs()),
            Self::RedisFlush => "Redis FLUSHALL".into(),
            Self::PostgresRestart => "Postgres restart -m immediate".into(),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a device knows, from the updates it applied alone.
#[derive(Default)]
struct Local {
    mirror: Mirror,
    /// The pts of the last update applied.
    pts: i32,
    /// Updates applied that did not continue the one before.
    breaks: u64,
    /// Times the log no longer held what the device missed.
    too_long: u64,
}

impl Local {
    fn apply(&mut self, update: &PtsUpdate) {
        if update.pts - update.pts_count != self.pts {
            self.breaks += 1;
        }
        self.pts = update.pts;
        self.mirror.apply(update);
    }

    /// How often each text is in the dialog with `peer`.
    fn texts(&self, peer: i64) -> HashMap<String, usize> {
        count_texts(self.mirror.history(peer).into_iter().map(|m| m.text))
    }
}

fn count_texts(texts: impl Iterator<Item = String>) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for text in texts {
        *counts.entry(text).or_insert(0) += 1;
    }
    counts
}

/// How a device learns its updates.
enum Follow {
    /// An `UpdateStream` read by a task of its own, for the whole suite.
    Streamed {
        local: Arc<Mutex<Local>>,
        task: JoinHandle<()>,
    },
    /// getDifference, whenever the suite looks.
    CaughtUp {
        client: Client,
        seq: Sequencer,
        local: Box<Local>,
    },
}

struct Device {
    name: &'static str,
    /// 0 Alice, 1 Bob.
    user: usize,
    follow: Follow,
}

impl Device {
    async fn streamed(
        name: &'static str,
        user: usize,
        client: Client,
        stop: CancellationToken,
    ) -> anyhow::Result<Self> {
        let state: State = client.get_state().await?.into();
        let local = Arc::new(Mutex::new(Local {
            pts: state.pts,
            ..Local::default()
        }));
        let mut stream = UpdateStream::open(client, state, StreamOptions::default()).await?;
        let task = {
            let local = local.clone();
            tokio::spawn(async move {
                loop {
                    let event = tokio::select! {
                        () = stop.cancelled() => return,
                        event = stream.next() => event,
                    };
                    let mut local = lock(&local);
                    match &event {
                        Event::Update(applied) => local.apply(&applied.update),
                        Event::TooLong { .. } => local.too_long += 1,
                        _ => {}
                    }
                }
            })
        };
        Ok(Self {
            name,
            user,
            follow: Follow::Streamed { local, task },
        })
    }

    async fn caught_up(name: &'static str, user: usize, client: Client) -> anyhow::Result<Self> {
        let state: State = client.get_state().await?.into();
        Ok(Self {
            name,
            user,
            follow: Follow::CaughtUp {
                client,
                seq: Sequencer::new(state),
                local: Box::new(Local {
                    pts: state.pts,
                    ..Local::default()
                }),
            },
        })
    }

    /// A device that catches up does so now; a failure (the system still recovering) is
    /// retried at the next look.
    async fn refresh(&mut self) {
        if let Follow::CaughtUp { client, seq, local } = &mut self.follow {
            let outcome = client.catch_up(seq, |update, _| local.apply(&update)).await;
            if let Ok(oxigram_client::CatchUp::TooLong { .. }) = outcome {
                local.too_long += 1;
            }
        }
    }

    fn look<R>(&self, f: impl FnOnce(&Local) -> R) -> R {
        match &self.follow {
            Follow::Streamed { local, .. } => f(&lock(local)),
            Follow::CaughtUp { local, .. } => f(local),
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        if let Follow::Streamed { task, .. } = &self.follow {
            task.abort();
        }
    }
}

/// A failed call of a send, as the client saw it.
struct Failure {
    code: String,
    message: String,
}

/// The load of one fault: each user's senders send to the other user, one send at a time
/// each, every failed one retried with its `random_id` until acknowledged.
struct Load {
    /// `(user, text, when)` of every acknowledged send.
    acked: Mutex<Vec<(usize, String, Instant)>>,
    failures: Mutex<Vec<Failure>>,
    stop: CancellationToken,
}

impl Load {
    fn start(
        senders: [(Client, i64); 2],
        next_id: Arc<AtomicI64>,
    ) -> (Arc<Self>, Vec<JoinHandle<anyhow::Result<()>>>) {
        let load = Arc::new(Self {
            acked: Mutex::new(Vec::new()),
            failures: Mutex::new(Vec::new()),
            stop: CancellationToken::new(),
        });
        let mut tasks = Vec::new();
        for (user, (client, peer)) in senders.into_iter().enumerate() {
            for _ in 0..SENDERS_PER_USER {
                let (load, client, next_id) = (load.clone(), client.clone(), next_id.clone());
                tasks.push(tokio::spawn(async move {
                    load.send_until_stopped(user, &client, peer, &next_id).await
                }));
            }
        }
        (load, tasks)
    }

    async fn send_until_stopped(
        &self,
        user: usize,
        client: &Client,
        peer: i64,
        next_id: &AtomicI64,
    ) -> anyhow::Result<()> {
        while !self.stop.is_cancelled() {
            let random_id = next_id.fetch_add(1, Ordering::Relaxed);
            let text = format!("{}{random_id}", ["a", "b"][user]);
            let first_try = Instant::now();
            loop {
                let sent = client
                    .send_message(SendMessageRequest {
                        peer: Some(InputPeer::user(peer)),
                        random_id,
                        text: text.clone(),
                        ..Default::default()
                    })
                    .await;
                match sent {
                    Ok(_) => break,
                    Err(error) => {
                        let code = error.code();
                        lock(&self.failures).push(Failure {
                            code: code.clone(),
                            message: error.to_string(),
                        });
                        anyhow::ensure!(
                            first_try.elapsed() < RETRY_FOR,
                            "send {text} still fails after {RETRY_FOR:?}: {error}"
                        );
                        let wait = code
                            .strip_prefix("FLOOD_WAIT_")
                            .and_then(|s| s.parse::<u64>().ok())
                            .map_or(Duration::from_millis(50), Duration::from_secs);
                        tokio::time::sleep(wait).await;
                    }
                }
            }
            lock(&self.acked).push((user, text, Instant::now()));
            // A steady stream, not a flood: the two cores also run Postgres and six services.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Acknowledgements per second between `from` and `to`.
    fn rate_between(&self, from: Instant, to: Instant) -> f64 {
        let acked = lock(&self.acked)
            .iter()
            .filter(|(_, _, at)| *at >= from && *at < to)
            .count();
        acked as f64 / (to - from).as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// Stops the senders once their sends in flight are acknowledged.
    async fn finish(
        &self,
        tasks: Vec<JoinHandle<anyhow::Result<()>>>,
    ) -> anyhow::Result<(Vec<(usize, String)>, Vec<Failure>)> {
        self.stop.cancel();
        for task in tasks {
            task.await??;
        }
        let acked = std::mem::take(&mut *lock(&self.acked))
            .into_iter()
            .map(|(user, text, _)| (user, text))
            .collect();
        Ok((acked, std::mem::take(&mut *lock(&self.failures))))
    }
}

/// The codes a client may meet while a fault lasts, each telling it to retry: the services'
/// `SERVICE_UNAVAILABLE` (outcome unknown), a gateway that cannot be reached
/// (`UNREACHABLE`, `GRPC_Unavailable`) or whose connection broke mid-call
/// (`CONNECTION_LOST`), and the client's own deadline.
fn retryable(code: &str) -> bool {
    matches!(
        code,
        "SERVICE_UNAVAILABLE"
            | "UNREACHABLE"
            | "CONNECTION_LOST"
            | "TIMEOUT"
            | "GRPC_Unavailable"
            | "GRPC_Cancelled"
    ) || code.starts_with("FLOOD_WAIT_")
}

/// Every message of the dialog with `peer` as its owner's history pages it, by text.
async fn server_history(client: &Client, peer: i64) -> anyhow::Result<HashMap<String, usize>> {
    let mut texts = Vec::new();
    let mut offset_id = 0;
    loop {
        let page = client
            .get_history(GetHistoryRequest {
                peer: Some(InputPeer::user(peer)),
                offset_id,
                limit: 100,
                ..Default::default()
            })
            .await?
            .messages;
        let Some(last) = page.last() else { break };
        offset_id = last.id;
        texts.extend(page.into_iter().map(|m| m.text));
    }
    Ok(count_texts(texts.into_iter()))
}

/// The unread count of `owner`'s dialog with `peer` as the server keeps it.
async fn server_unread(client: &Client, peer: i64) -> anyhow::Result<i32> {
    let dialogs = client
        .get_dialogs(GetDialogsRequest {
            limit: 100,
            ..Default::default()
        })
        .await?
        .dialogs;
    let dialog = dialogs
        .iter()
        .find(|d| d.peer.as_ref().and_then(|p| p.user_id()) == Some(peer))
        .context("no dialog with the peer")?;
    Ok(dialog.unread_count)
}

fn seconds(took: Option<Duration>) -> String {
    took.map_or(format!("none within {} s", GIVE_UP_AFTER.as_secs()), |t| {
        format!("{:.2} s", t.as_secs_f64())
    })
}

/// The system, its users and devices, and what they sent so far.
struct Suite {
    system: System,
    proxy: HangingProxy,
    /// Redis itself, past the proxy.
    redis_url: String,
    /// Alice's and Bob's sending devices (which also catch up by getDifference).
    senders: [Client; 2],
    ids: [i64; 2],
    devices: Vec<Device>,
    next_id: Arc<AtomicI64>,
    /// Every acknowledged send so far: `(user, text)`.
    acked: Vec<(usize, String)>,
    stop: CancellationToken,
    /// What the suite found wrong, fault by fault.
    problems: Vec<String>,
    /// Just before Redis answers again: of the sends acknowledged [`PULLED_WITHIN`] before,
    /// how many the streamed devices lack, and how many there are.
    during_outage: Option<(usize, usize)>,
}

impl Suite {
    async fn start() -> anyhow::Result<Self> {
        let (mut config, ground) = System::config_on(private_infra().await?).await?;
        let redis_url = config.redis_url.clone().context("no Redis URL")?;
        let (redis_addr, db) = split_redis_url(&redis_url).await?;
        let proxy = HangingProxy::start(redis_addr).await?;
        config.redis_url = Some(format!("redis://{}{db}", proxy.addr));
        let system = System::start_with(config, ground, Mode::Processes).await?;

        let (alice, alice_id) = signed_up(&system, "15551801", "Alice", None).await?;
        let (bob, bob_id) = signed_up(&system, "15551802", "Bob", None).await?;
        let (alice_watch, _) = signed_up(&system, "15551801", "Alice", Some(alice_id)).await?;
        let (bob_watch, _) = signed_up(&system, "15551802", "Bob", Some(bob_id)).await?;
        let stop = CancellationToken::new();
        let devices = vec![
            Device::caught_up("Alice's sender", 0, alice.clone()).await?,
            Device::streamed("Alice's streamed device", 0, alice_watch, stop.clone()).await?,
            Device::caught_up("Bob's sender", 1, bob.clone()).await?,
            Device::streamed("Bob's streamed device", 1, bob_watch, stop.clone()).await?,
        ];
        Ok(Self {
            system,
            proxy,
            redis_url,
            senders: [alice, bob],
            ids: [alice_id, bob_id],
            devices,
            next_id: Arc::new(AtomicI64::new(1)),
            acked: Vec::new(),
            stop,
            problems: Vec::new(),
            during_outage: None,
        })
    }

    /// Lets the fault happen and the system recover from it; returns when it recovered: the
    /// service SERVING again, or the server accepting connections again.
    async fn inflict(&mut self, fault: Fault, load: &Load) -> anyhow::Result<Instant> {
        match fault {
            Fault::Kill(target) => {
                self.system.stop_service(target).await?;
                tokio::time::sleep(Duration::from_millis(500)).await;
                self.system.start_service(target)?;
                self.system.wait_serving(target).await?;
            }
            Fault::RedisKill => self.system.restart_redis().await?,
            Fault::RedisHang => {
                self.proxy.hang();
                tokio::time::sleep(HANG).await;
                // Pushes cannot find the devices while Redis hangs: their streams pull.
                let cutoff = Instant::now() - PULLED_WITHIN;
                let mut expected: Vec<String> =
                    self.acked.iter().map(|(_, text)| text.clone()).collect();
                expected.extend(
                    lock(&load.acked)
                        .iter()
                        .filter(|(_, _, at)| *at < cutoff)
                        .map(|(_, text, _)| text.clone()),
                );
                let streamed = self
                    .devices
                    .iter()
                    .filter(|d| matches!(d.follow, Follow::Streamed { .. }));
                let mut missing = 0;
                for device in streamed {
                    let texts = device.look(|l| l.texts(self.ids[1 - device.user]));
                    missing += expected.iter().filter(|t| !texts.contains_key(*t)).count();
                }
                self.during_outage = Some((missing, expected.len()));
                self.proxy.resume();
            }
            Fault::RedisFlush => {
                let client = redis::Client::open(self.redis_url.as_str())?;
                let mut conn = client.get_multiplexed_async_connection().await?;
                redis::cmd("FLUSHALL").query_async::<()>(&mut conn).await?;
            }
            Fault::PostgresRestart => self.system.restart_postgres().await?,
        }
        Ok(Instant::now())
    }

    async fn meet(&mut self, fault: Fault) -> anyhow::Result<()> {
        let senders = [
            (self.senders[0].clone(), self.ids[1]),
            (self.senders[1].clone(), self.ids[0]),
        ];
        let (load, tasks) = Load::start(senders, self.next_id.clone());
        let steady_from = Instant::now() + Duration::from_millis(500);
        tokio::time::sleep(STEADY + Duration::from_millis(500)).await;
        let fault_at = Instant::now();
        let recovered_at = self.inflict(fault, &load).await?;
        tokio::time::sleep(AFTER).await;
        let before = load.rate_between(steady_from, fault_at);
        // A fault that is over at once (FLUSHALL) is measured over the second after it.
        let during = load.rate_between(fault_at, recovered_at.max(fault_at + AFTER));
        let (acked, failures) = load.finish(tasks).await?;
        self.acked.extend(acked.iter().cloned());

        let converged_at = self.converge(recovered_at).await;
        let projected_at = self.projected(recovered_at).await?;
        // Recovered once every device holds everything and the server's dialogs count it.
        let recovery = converged_at
            .zip(projected_at)
            .map(|(devices, dialogs)| devices.max(dialogs).saturating_duration_since(recovered_at));
        let (lost, duplicated) = self.check_servers().await?;
        let mut problems = self.check_devices().await?;
        let wrong_codes: Vec<String> = failures
            .iter()
            .filter(|f| !retryable(&f.code))
            .map(|f| format!("{}: {}", f.code, f.message))
            .collect();
        let mut codes: Vec<(String, usize)> = count_texts(failures.iter().map(|f| f.code.clone()))
            .into_iter()
            .collect();
        codes.sort();

        eprintln!(
            "fault suite: {}: {} sends acknowledged, lost {lost}, duplicated {duplicated}, \
             recovery {} (devices {}, dialogs {}), throughput {during:.1}/s during the fault \
             ({:.0} % of {before:.1}/s before); {} failed calls {codes:?}",
            fault.name(),
            acked.len(),
            seconds(recovery),
            seconds(converged_at.map(|at| at.saturating_duration_since(recovered_at))),
            seconds(projected_at.map(|at| at.saturating_duration_since(recovered_at))),
            100.0 * during / before.max(f64::MIN_POSITIVE),
            failures.len(),
        );
        if let Some((missing, of)) = self.during_outage.take() {
            eprintln!(
                "fault suite: {}: just before Redis answered again, the streamed devices lacked \
                 {missing} of the {of} sends acknowledged {PULLED_WITHIN:?} before (each \
                 device counted)",
                fault.name()
            );
            if missing > 0 {
                problems.push(format!(
                    "the streamed devices lacked {missing} sends while Redis was down: their \
                     streams did not pull"
                ));
            }
        }
        if lost > 0 || duplicated > 0 {
            problems.push(format!("lost {lost}, duplicated {duplicated}"));
        }
        match recovery {
            Some(r) if r <= CONVERGE_WITHIN => {}
            _ => problems.push(format!(
                "devices not converged within {CONVERGE_WITHIN:?} of the recovery: {recovery:?}"
            )),
        }
        if !wrong_codes.is_empty() {
            problems.push(format!(
                "failed sends that do not say retry: {wrong_codes:?}"
            ));
        }
        if let Fault::RedisHang = fault
            && during < 0.5 * before
        {
            problems.push(format!(
                "sends fell to {during:.1}/s while Redis hung, from {before:.1}/s"
            ));
        }
        self.problems.extend(
            problems
                .into_iter()
                .map(|p| format!("{}: {p}", fault.name())),
        );
        Ok(())
    }

    /// Whether `device` holds every acknowledged send exactly once (and nothing else) in its
    /// dialog with the other user.
    fn holds_all(&self, device: &Device) -> bool {
        let peer = self.ids[1 - device.user];
        device.look(|local| {
            let texts = local.texts(peer);
            texts.len() == self.acked.len()
                && self
                    .acked
                    .iter()
                    .all(|(_, text)| texts.get(text) == Some(&1))
        })
    }

    /// When every device held every acknowledged send (`None`: not within [`GIVE_UP_AFTER`]).
    async fn converge(&mut self, recovered_at: Instant) -> Option<Instant> {
        let deadline = recovered_at + GIVE_UP_AFTER;
        loop {
            let mut devices = std::mem::take(&mut self.devices);
            for device in &mut devices {
                if !self.holds_all(device) {
                    device.refresh().await;
                }
            }
            let all = devices.iter().all(|d| self.holds_all(d));
            self.devices = devices;
            if all {
                return Some(Instant::now());
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// When both users' dialogs count every message received as unread (`None`: not within
    /// [`GIVE_UP_AFTER`]): the dialogs projection caught up with the update log.
    async fn projected(&self, recovered_at: Instant) -> anyhow::Result<Option<Instant>> {
        let received = |user: usize| self.acked.iter().filter(|(u, _)| *u != user).count();
        loop {
            let mut exact = true;
            for user in 0..2 {
                let unread = server_unread(&self.senders[user], self.ids[1 - user]).await;
                exact &= unread.is_ok_and(|n| usize::try_from(n).ok() == Some(received(user)));
            }
            if exact {
                return Ok(Some(Instant::now()));
            }
            if recovered_at.elapsed() >= GIVE_UP_AFTER {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Acknowledged sends missing from an owner's history, and sends stored more than once
    /// (over both owners).
    async fn check_servers(&self) -> anyhow::Result<(usize, usize)> {
        let (mut lost, mut duplicated) = (0, 0);
        for user in 0..2 {
            let history = server_history(&self.senders[user], self.ids[1 - user]).await?;
            lost += self
                .acked
                .iter()
                .filter(|(_, text)| !history.contains_key(text))
                .count();
            duplicated += history.values().filter(|n| **n > 1).count();
        }
        Ok((lost, duplicated))
    }

    /// The devices against the server: pts contiguous up to the server's, unread counts.
    async fn check_devices(&self) -> anyhow::Result<Vec<String>> {
        let mut problems = Vec::new();
        for user in 0..2 {
            let client = &self.senders[user];
            let peer = self.ids[1 - user];
            let received = self.acked.iter().filter(|(u, _)| *u != user).count();
            let unread = server_unread(client, peer).await?;
            if usize::try_from(unread).ok() != Some(received) {
                problems.push(format!(
                    "user {user}'s unread count is {unread} for {received} messages received"
                ));
            }
            let pts = client.get_state().await?.pts;
            for device in self.devices.iter().filter(|d| d.user == user) {
                let (breaks, too_long, local_pts, local_unread, stats) = device.look(|l| {
                    (
                        l.breaks,
                        l.too_long,
                        l.pts,
                        l.mirror.dialog(peer).map(|d| d.unread_count),
                        l.mirror.stats(),
                    )
                });
                if breaks > 0 || too_long > 0 || local_pts != pts {
                    problems.push(format!(
                        "{}: {breaks} breaks in its pts, {too_long} times too long, at pts \
                         {local_pts} of {pts}",
                        device.name
                    ));
                }
                if local_unread != Some(unread) {
                    problems.push(format!(
                        "{}: unread count {local_unread:?}, the server's {unread}",
                        device.name
                    ));
                }
                if stats != oxigram_client::MirrorStats::default() {
                    problems.push(format!("{}: applied out of order: {stats:?}", device.name));
                }
            }
        }
        Ok(problems)
    }
}

impl Drop for Suite {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A device signed up as a new user, or (`existing` set) signed in to her; its client bounds
/// every call by [`CALL_DEADLINE`].
async fn signed_up(
    system: &System,
    phone: &str,
    name: &str,
    existing: Option<i64>,
) -> anyhow::Result<(Client, i64)> {
    let mut device = system.device().await?;
    let user = match existing {
        None => device.sign_up(phone, name).await?,
        Some(_) => device.sign_in(phone).await?,
    };
    Ok(((*device).clone().with_deadline(CALL_DEADLINE), user.id))
}

#[tokio::test]
async fn every_acknowledged_send_survives_every_fault() -> anyhow::Result<()> {
    let started = Instant::now();
    let mut suite = Suite::start().await?;
    let faults = [
        Fault::Kill(Target::Messages),
        Fault::Kill(Target::Updates),
        Fault::Kill(Target::Dialogs),
        Fault::Kill(Target::Dispatch),
        Fault::Kill(Target::Media),
        Fault::Kill(Target::Gateway),
        Fault::RedisKill,
        Fault::RedisHang,
        Fault::RedisFlush,
        Fault::PostgresRestart,
    ];
    for fault in faults {
        suite.meet(fault).await?;
    }
    eprintln!(
        "fault suite: {} faults, {} sends acknowledged in all, {:?} wall time",
        faults.len(),
        suite.acked.len(),
        started.elapsed()
    );
    let problems = std::mem::take(&mut suite.problems);
    assert!(problems.is_empty(), "{problems:#?}");
    Ok(())
}
