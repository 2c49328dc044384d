//! The harness of oxigram's cross-service suites: a shared private Postgres and Redis (or
//! ones named by `OXIGRAM_TEST_DATABASE_URL` / `OXIGRAM_TEST_REDIS_URL`; or, for a test that
//! crashes and restarts them, ones of its own: [`System::start_private`]), a fresh database and
//! Redis key prefix per test, the six services started in this process or as separate
//! `oxigram serve --target X` processes, and a client that drives the gateway like an app.

pub mod client;
pub mod mtproto;
pub mod proxy;

use std::{
    collections::HashMap,
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::Duration,
};

use anyhow::Context;
use oxigram::Target;
use oxigram_kit::{Config, ServiceAddr};
use sqlx::{Connection, PgConnection};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use client::TestClient;
pub use oxigram_testkit::{Infra, free_port, fresh_database, infra, private_infra, unique_name};

/// The login code every test system accepts.
pub const LOGIN_CODE: &str = "12345";

fn local_service(port: u16) -> ServiceAddr {
    ServiceAddr {
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        endpoint: format!("http://127.0.0.1:{port}"),
        database_url: None,
    }
}

/// How the services run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// All six in the test's process (single-binary mode).
    OneProcess,
    /// Each as its own `oxigram serve --target X` process.
    Processes,
}

enum Running {
    Task(CancellationToken, JoinHandle<anyhow::Result<()>>),
    Process(Child),
}

/// What a test system stands on: its folder and its Postgres and Redis.
pub struct Ground {
    pub dir: PathBuf,
    pub infra: Infra,
}

/// A running oxigram with its own database and Redis key prefix.
pub struct System {
    pub config: Arc<Config>,
    pub mode: Mode,
    pub dir: PathBuf,
    running: HashMap<Target, Running>,
    /// Dropped last: the services stop before their Postgres and Redis go.
    infra: Infra,
}

impl System {
    /// A configuration on free ports, a fresh database and a fresh key prefix.
    pub async fn config() -> anyhow::Result<(Config, Ground)> {
        Self::config_on(infra().await?).await
    }

    /// The same, on the given Postgres and Redis.
    pub async fn config_on(infra: Infra) -> anyhow::Result<(Config, Ground)> {
        let dir = std::env::temp_dir().join(unique_name("oxigram-test"));
        std::fs::create_dir_all(&dir)?;
        let mut config = Config {
            database_url: Some(fresh_database(&infra).await?),
            redis_url: Some(infra.redis_url.clone()),
            redis_key_prefix: format!("{}:", unique_name("t")),
            db_pool_size: 8,
            rpc_timeout_ms: 10_000,
            ..Default::default()
        };
        config.gateway.fixed_login_code = Some(LOGIN_CODE.into());
        config.gateway.route_ttl_secs = 30;
        // Suites send fast; the limit itself has its own test.
        config.gateway.sends_per_minute = 100_000;
        config.gateway.lookups_per_minute = 100_000;
        config.limits.send_code_per_phone = 100_000;
        config.limits.sign_in_per_phone = 100_000;
        config.limits.login_per_key = 100_000;
        config.limits.difference_per_device = 100_000;
        config.limits.stream_opens_per_device = 100_000;
        config.limits.upload_parts_per_user = 100_000;
        config.media.blob_dir = dir.join("media").display().to_string();
        config.outbox.poll_ms = 100;
        config.outbox.fast_path_grace_ms = 300;
        config.outbox.backoff_base_ms = 50;
        config.outbox.backoff_max_ms = 500;
        config.telemetry.log_filter = "info,sqlx=warn".into();
        let s = &mut config.services;
        for addr in [
            &mut s.gateway,
            &mut s.messages,
            &mut s.updates,
            &mut s.dialogs,
            &mut s.dispatch,
            &mut s.media,
        ] {
            *addr = local_service(free_port()?);
        }
        Ok((config, Ground { dir, infra }))
    }

    /// Starts every service and waits until the gateway is SERVING.
    pub async fn start(mode: Mode) -> anyhow::Result<Self> {
        let (config, ground) = Self::config().await?;
        Self::start_with(config, ground, mode).await
    }

    /// Starts every service on a Postgres and Redis of this test alone ([`private_infra`]),
    /// which it may restart.
    pub async fn start_private(mode: Mode) -> anyhow::Result<Self> {
        let (config, ground) = Self::config_on(private_infra().await?).await?;
        Self::start_with(config, ground, mode).await
    }

    pub async fn start_with(config: Config, ground: Ground, mode: Mode) -> anyhow::Result<Self> {
        let mut system = Self {
            config: Arc::new(config),
            mode,
            dir: ground.dir,
            running: HashMap::new(),
            infra: ground.infra,
        };
        for target in Target::ALL {
            system.start_service(target)?;
        }
        system.wait_serving(Target::Gateway).await?;
        Ok(system)
    }

    fn addr(&self, target: Target) -> &ServiceAddr {
        let s = &self.config.services;
        match target {
            Target::Gateway => &s.gateway,
            Target::Messages => &s.messages,
            Target::Updates => &s.updates,
            Target::Dialogs => &s.dialogs,
            Target::Dispatch => &s.dispatch,
            Target::Media => &s.media,
        }
    }

    /// The process id of a service run as its own process (Mode::Processes), else of this
    /// test's process, which runs it.
    pub fn pid(&self, target: Target) -> Option<u32> {
        match self.running.get(&target)? {
            Running::Process(child) => Some(child.id()),
            Running::Task(..) => Some(std::process::id()),
        }
    }

    /// The gateway's URL.
    pub fn gateway(&self) -> String {
        self.config.services.gateway.endpoint.clone()
    }

    pub async fn wait_serving(&self, target: Target) -> anyhow::Result<()> {
        let stop = CancellationToken::new();
        let wait = oxigram_kit::wait_serving(target.name(), &self.addr(target).endpoint, &stop);
        // A service that fails to start fails the wait at once, with its error.
        let failed = async {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if let Some(name) = self.stopped_service() {
                    return name;
                }
            }
        };
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            tokio::select! {
                outcome = wait => outcome,
                name = failed => Err(anyhow::anyhow!("service {name} stopped while starting (logs in {})", self.dir.display())),
            }
        })
        .await;
        waited.with_context(|| {
            format!(
                "{} did not become SERVING (logs in {})",
                target.name(),
                self.dir.display()
            )
        })?
    }

    /// A service that has already stopped, if any.
    fn stopped_service(&self) -> Option<&'static str> {
        self.running.iter().find_map(|(target, running)| {
            let stopped = match running {
                Running::Task(_, task) => task.is_finished(),
                // A process's exit shows in its log; the wait's timeout covers it.
                Running::Process(_) => false,
            };
            stopped.then(|| target.name())
        })
    }

    /// Starts one service (again).
    pub fn start_service(&mut self, target: Target) -> anyhow::Result<()> {
        let running = match self.mode {
            Mode::OneProcess => {
                let token = CancellationToken::new();
                let (config, stop) = (self.config.clone(), token.clone());
                let task = tokio::spawn(async move {
                    let outcome = oxigram::run(config, &[target], stop).await;
                    // In one process a service's error has no log file: say it where the
                    // test's output shows it.
                    if let Err(e) = &outcome {
                        eprintln!("service {} failed: {e:#}", target.name());
                    }
                    outcome
                });
                Running::Task(token, task)
            }
            Mode::Processes => {
                let log = std::fs::File::create(self.dir.join(format!("{}.log", target.name())))?;
                let child = Command::new(launcher()?)
                    .args(["serve", "--target", target.name()])
                    .envs(config_env(&self.config))
                    .env_remove("RUST_LOG")
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .context("cannot start the oxigram launcher")?;
                Running::Process(child)
            }
        };
        self.running.insert(target, running);
        Ok(())
    }

    /// Stops one service: gracefully in one process, by SIGKILL (a crash) as a process.
    pub async fn stop_service(&mut self, target: Target) -> anyhow::Result<()> {
        match self.running.remove(&target) {
            Some(Running::Task(token, task)) => {
                token.cancel();
                task.await??;
            }
            Some(Running::Process(mut child)) => {
                child.kill()?;
                child.wait()?;
            }
            None => {}
        }
        Ok(())
    }

    /// Kills Redis (SIGKILL) and starts it again, empty, on the same port; returns once it
    /// accepts connections. Only a system on private servers ([`System::start_private`]).
    pub async fn restart_redis(&self) -> anyhow::Result<()> {
        self.infra.restart_redis().await
    }

    /// Restarts Postgres with `pg_ctl restart -m immediate` (every connection drops
    /// mid-statement; the data stays); returns once it accepts connections. Only a system on
    /// private servers ([`System::start_private`]).
    pub async fn restart_postgres(&self) -> anyhow::Result<()> {
        self.infra.restart_postgres().await
    }

    /// A connection to the test's database (to look at what the services wrote).
    pub async fn db(&self) -> anyhow::Result<PgConnection> {
        let url = self.config.database_url.clone().context("no database")?;
        Ok(PgConnection::connect(&url).await?)
    }

    /// A new device (auth key) of this system.
    pub async fn device(&self) -> anyhow::Result<TestClient> {
        TestClient::new(&self.gateway()).await
    }

    /// One signed-up device for each `(phone, name)`.
    pub async fn users<const N: usize>(
        &self,
        who: [(&str, &str); N],
    ) -> anyhow::Result<[TestClient; N]> {
        let mut devices = Vec::with_capacity(N);
        for (phone, name) in who {
            let mut device = self.device().await?;
            device.sign_up(phone, name).await?;
            devices.push(device);
        }
        devices
            .try_into()
            .map_err(|_| anyhow::anyhow!("one device per user"))
    }

    /// A user with two devices: the first signs up, the second signs in to the same account.
    pub async fn user_on_two_devices(
        &self,
        phone: &str,
        name: &str,
    ) -> anyhow::Result<(TestClient, TestClient, i64)> {
        let ([first, second], id) = self.user_on_devices(phone, name).await?;
        Ok((first, second, id))
    }

    /// A user with `N` devices: the first signs up, the others sign in to the same account.
    pub async fn user_on_devices<const N: usize>(
        &self,
        phone: &str,
        name: &str,
    ) -> anyhow::Result<([TestClient; N], i64)> {
        let mut devices = Vec::with_capacity(N);
        let mut id = 0;
        for i in 0..N {
            let mut device = self.device().await?;
            if i == 0 {
                id = device.sign_up(phone, name).await?.id;
            } else {
                device.sign_in(phone).await?;
            }
            devices.push(device);
        }
        let devices = devices
            .try_into()
            .map_err(|_| anyhow::anyhow!("{N} devices"))?;
        Ok((devices, id))
    }
}

/// One replica of a service in a process of its own ([`System::start_replicas`]).
pub struct Replica {
    /// Its log (stderr).
    pub log: PathBuf,
    child: Child,
}

impl Replica {
    /// Stops it as Kubernetes does, with SIGTERM, and waits until the process has exited.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        anyhow::ensure!(sent.success(), "cannot send SIGTERM to a replica");
        while self.child.try_wait()?.is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl System {
    /// Starts every service as its own process, and `target` as one process per address of
    /// `listens` (each listening there): the replicas callers find behind `target`'s endpoint.
    /// Waits until the gateway is SERVING.
    pub async fn start_replicas(
        config: Config,
        ground: Ground,
        target: Target,
        listens: &[SocketAddr],
    ) -> anyhow::Result<(Self, Vec<Replica>)> {
        let mut system = Self {
            config: Arc::new(config),
            mode: Mode::Processes,
            dir: ground.dir,
            running: HashMap::new(),
            infra: ground.infra,
        };
        for other in Target::ALL.into_iter().filter(|t| *t != target) {
            system.start_service(other)?;
        }
        let mut replicas = Vec::with_capacity(listens.len());
        for (i, listen) in listens.iter().enumerate() {
            let log = system.dir.join(format!("{}-{i}.log", target.name()));
            let child = Command::new(launcher()?)
                .args(["serve", "--target", target.name()])
                .envs(config_env(&system.config))
                .env(
                    format!(
                        "OXIGRAM_SERVICES__{}__LISTEN",
                        target.name().to_ascii_uppercase()
                    ),
                    listen.to_string(),
                )
                .env_remove("RUST_LOG")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log)?)
                .spawn()
                .context("cannot start the oxigram launcher")?;
            replicas.push(Replica { log, child });
        }
        system.wait_serving(Target::Gateway).await?;
        Ok((system, replicas))
    }
}

/// A second gateway instance ([`System::start_extra_gateway`]); it stops when dropped.
pub struct ExtraGateway {
    pub endpoint: String,
    stop: tokio_util::sync::DropGuard,
}

impl ExtraGateway {
    /// Stops it now (its streams end).
    pub fn stop(self) {
        drop(self.stop);
    }
}

impl System {
    /// Another gateway instance on this system's database, Redis and services, in this
    /// test's process on a port of its own, as a second replica behind a load balancer would
    /// be. Waits until it is SERVING.
    pub async fn start_extra_gateway(&self) -> anyhow::Result<ExtraGateway> {
        self.extra_gateway(None).await
    }

    /// [`System::start_extra_gateway`] with its own MTProto door on `mtproto_port` (same RSA
    /// key as the system's door).
    pub async fn start_extra_gateway_with_door(
        &self,
        mtproto_port: u16,
    ) -> anyhow::Result<ExtraGateway> {
        self.extra_gateway(Some(mtproto_port)).await
    }

    async fn extra_gateway(&self, mtproto_port: Option<u16>) -> anyhow::Result<ExtraGateway> {
        let mut config = (*self.config).clone();
        config.services.gateway = local_service(free_port()?);
        config.gateway.advertise_push = None;
        config.mtproto.listen = mtproto_port.map(|port| ([127, 0, 0, 1], port).into());
        config.metrics_addr = None;
        let endpoint = config.services.gateway.endpoint.clone();
        let token = CancellationToken::new();
        let stop = token.clone();
        tokio::spawn(async move {
            if let Err(e) = oxigram::run(Arc::new(config), &[Target::Gateway], stop).await {
                eprintln!("the extra gateway failed: {e:#}");
            }
        });
        let waiting = CancellationToken::new();
        tokio::time::timeout(
            Duration::from_secs(60),
            oxigram_kit::wait_serving("gateway", &endpoint, &waiting),
        )
        .await
        .context("the extra gateway did not become SERVING")??;
        Ok(ExtraGateway {
            endpoint,
            stop: token.drop_guard(),
        })
    }
}

impl Drop for System {
    fn drop(&mut self) {
        for (_, running) in self.running.drain() {
            match running {
                Running::Task(token, task) => {
                    token.cancel();
                    task.abort();
                }
                Running::Process(mut child) => {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
    }
}

/// A command running the `oxigram` launcher with `config` as its `OXIGRAM_*` environment
/// (for subcommands other than `serve`, e.g. `migrate`).
pub fn oxigram_command(config: &Config) -> anyhow::Result<Command> {
    let mut command = Command::new(launcher()?);
    command.envs(config_env(config)).env_remove("RUST_LOG");
    Ok(command)
}

/// A command running `oxictl`, the CLI, with none of this process's environment: a test
/// gives it every setting it means it to have.
pub fn oxictl_command() -> anyhow::Result<Command> {
    let mut command = Command::new(binary("oxictl")?);
    command.env_clear();
    Ok(command)
}

/// The `oxigram` binary next to the test binary.
fn launcher() -> anyhow::Result<PathBuf> {
    binary("oxigram")
}

/// A binary of the workspace next to the test binary (`cargo build --bins` puts it there).
fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .context("unexpected test binary location")?;
    let path = dir.join(name);
    anyhow::ensure!(
        path.exists(),
        "{} is missing: run `cargo build --bins` before the suite (scripts/test does)",
        path.display()
    );
    Ok(path)
}

/// The configuration as `OXIGRAM_*` variables, for launcher processes.
fn config_env(c: &Config) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "OXIGRAM_DATABASE_URL".into(),
            c.database_url.clone().unwrap_or_default(),
        ),
        (
            "OXIGRAM_REDIS_URL".into(),
            c.redis_url.clone().unwrap_or_default(),
        ),
        (
            "OXIGRAM_REDIS_KEY_PREFIX".into(),
            c.redis_key_prefix.clone(),
        ),
        (
            "OXIGRAM_REDIS__CALL_TIMEOUT_MS".into(),
            c.redis.call_timeout_ms.to_string(),
        ),
        (
            "OXIGRAM_REDIS__BREAKER_FAILURES".into(),
            c.redis.breaker_failures.to_string(),
        ),
        (
            "OXIGRAM_REDIS__BREAKER_PROBE_MS".into(),
            c.redis.breaker_probe_ms.to_string(),
        ),
        ("OXIGRAM_DB_POOL_SIZE".into(), c.db_pool_size.to_string()),
        (
            "OXIGRAM_RPC_TIMEOUT_MS".into(),
            c.rpc_timeout_ms.to_string(),
        ),
        (
            "OXIGRAM_GATEWAY__FIXED_LOGIN_CODE".into(),
            format!("\"{LOGIN_CODE}\""),
        ),
        (
            "OXIGRAM_GATEWAY__ROUTE_TTL_SECS".into(),
            c.gateway.route_ttl_secs.to_string(),
        ),
        (
            "OXIGRAM_GATEWAY__SENDS_PER_MINUTE".into(),
            c.gateway.sends_per_minute.to_string(),
        ),
        (
            "OXIGRAM_GATEWAY__LOOKUPS_PER_MINUTE".into(),
            c.gateway.lookups_per_minute.to_string(),
        ),
        (
            "OXIGRAM_ADMISSION__MAX_IN_FLIGHT".into(),
            c.admission.max_in_flight.to_string(),
        ),
        (
            "OXIGRAM_LIMITS__EXPECTED_INSTANCES".into(),
            c.limits.expected_instances.to_string(),
        ),
        (
            "OXIGRAM_LIMITS__SEND_CODE_PER_PHONE".into(),
            c.limits.send_code_per_phone.to_string(),
        ),
        (
            "OXIGRAM_LIMITS__SIGN_IN_PER_PHONE".into(),
            c.limits.sign_in_per_phone.to_string(),
        ),
        (
            "OXIGRAM_LIMITS__LOGIN_PER_KEY".into(),
            c.limits.login_per_key.to_string(),
        ),
        (
            "OXIGRAM_LIMITS__DIFFERENCE_PER_DEVICE".into(),
            c.limits.difference_per_device.to_string(),
        ),
        (
            "OXIGRAM_LIMITS__STREAM_OPENS_PER_DEVICE".into(),
            c.limits.stream_opens_per_device.to_string(),
        ),
        (
            "OXIGRAM_STREAMS__IDLE_TIMEOUT_SECS".into(),
            c.streams.idle_timeout_secs.to_string(),
        ),
        (
            "OXIGRAM_STREAMS__MAX_CONCURRENT_CATCH_UP".into(),
            c.streams.max_concurrent_catch_up.to_string(),
        ),
        (
            "OXIGRAM_STREAMS__CATCH_UPS_PER_SECOND".into(),
            c.streams.catch_ups_per_second.to_string(),
        ),
        (
            "OXIGRAM_STREAMS__CATCH_UP_LINE".into(),
            c.streams.catch_up_line.to_string(),
        ),
        (
            "OXIGRAM_STREAMS__RETRY_AFTER_MS".into(),
            c.streams.retry_after_ms.to_string(),
        ),
        (
            "OXIGRAM_UPDATES__RETAIN_PER_USER".into(),
            c.updates.retain_per_user.to_string(),
        ),
        ("OXIGRAM_MEDIA__BLOB_DIR".into(), c.media.blob_dir.clone()),
        (
            "OXIGRAM_MEDIA__FILE_REFERENCE_TTL_SECONDS".into(),
            c.media.file_reference_ttl_seconds.to_string(),
        ),
        (
            "OXIGRAM_MEDIA__GC_INTERVAL_SECONDS".into(),
            c.media.gc_interval_seconds.to_string(),
        ),
        (
            "OXIGRAM_MEDIA__S3__BUCKET".into(),
            c.media.s3.bucket.clone(),
        ),
        (
            "OXIGRAM_MEDIA__S3__ENDPOINT".into(),
            c.media.s3.endpoint.clone(),
        ),
        (
            "OXIGRAM_MEDIA__S3__ALLOW_HTTP".into(),
            c.media.s3.allow_http.to_string(),
        ),
        // A test's own S3-compatible server takes any keys; a real store's come from the
        // environment of the process.
        ("AWS_ACCESS_KEY_ID".into(), "test".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "test".into()),
        (
            "OXIGRAM_OUTBOX__POLL_MS".into(),
            c.outbox.poll_ms.to_string(),
        ),
        (
            "OXIGRAM_OUTBOX__MAX_ATTEMPTS".into(),
            c.outbox.max_attempts.to_string(),
        ),
        (
            "OXIGRAM_OUTBOX__FAST_PATH_GRACE_MS".into(),
            c.outbox.fast_path_grace_ms.to_string(),
        ),
        (
            "OXIGRAM_OUTBOX__BACKOFF_BASE_MS".into(),
            c.outbox.backoff_base_ms.to_string(),
        ),
        (
            "OXIGRAM_OUTBOX__BACKOFF_MAX_MS".into(),
            c.outbox.backoff_max_ms.to_string(),
        ),
        (
            "OXIGRAM_TELEMETRY__LOG_FILTER".into(),
            c.telemetry.log_filter.clone(),
        ),
        (
            "OXIGRAM_TELEMETRY__OTLP_ENDPOINT".into(),
            c.telemetry.otlp_endpoint.clone(),
        ),
        // A test reads its spans within seconds: export them every 200 ms, not every 5 s.
        ("OTEL_BSP_SCHEDULE_DELAY".into(), "200".into()),
        (
            "OXIGRAM_BALANCING__ENDPOINT_REFRESH_MS".into(),
            c.balancing.endpoint_refresh_ms.to_string(),
        ),
        (
            "OXIGRAM_BALANCING__SHUTDOWN_DRAIN_MS".into(),
            c.balancing.shutdown_drain_ms.to_string(),
        ),
        ("OXIGRAM_ADMIN__TOKEN".into(), c.admin.token.clone()),
    ];
    if let Some(hosts) = &c.balancing.hosts_file {
        env.push((
            "OXIGRAM_BALANCING__HOSTS_FILE".into(),
            hosts.display().to_string(),
        ));
    }
    let s = &c.services;
    for (name, addr) in [
        ("GATEWAY", &s.gateway),
        ("MESSAGES", &s.messages),
        ("UPDATES", &s.updates),
        ("DIALOGS", &s.dialogs),
        ("DISPATCH", &s.dispatch),
        ("MEDIA", &s.media),
    ] {
        env.push((
            format!("OXIGRAM_SERVICES__{name}__LISTEN"),
            addr.listen.to_string(),
        ));
        env.push((
            format!("OXIGRAM_SERVICES__{name}__ENDPOINT"),
            addr.endpoint.clone(),
        ));
    }
    env
}

/// The resident memory of process `pid`, in KiB (VmRSS), and its peak (VmHWM).
pub fn rss_kib(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok((field("VmRSS:"), field("VmHWM:")))
}

/// Polls `check` until it returns `Some`, or fails after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Rate-limit windows are calendar minutes: waits out the last seconds of one, so a test's
/// few sends fall into a single window.
pub async fn avoid_minute_edge() -> anyhow::Result<()> {
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs()
        % 60;
    if second > 50 {
        tokio::time::sleep(Duration::from_secs(61 - second)).await;
    }
    Ok(())
}
