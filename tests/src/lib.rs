//! The harness of oxigram's cross-service suites: a shared private Postgres and Redis (or
//! ones named by `OXIGRAM_TEST_DATABASE_URL` / `OXIGRAM_TEST_REDIS_URL`; or, for a test that
//! crashes and restarts them, ones of its own: [`System::start_private`]), a fresh database and
//! Redis key prefix per test, the six services started in this process or as separate
//! `oxigram serve --target X` processes, and a client that drives the gateway like an app.

pub mod client;
mod containers;

use std::{
    collections::HashMap,
    net::{SocketAddr, TcpListener},
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

/// The login code every test system accepts.
pub const LOGIN_CODE: &str = "12345";

/// The Postgres and Redis one test runs against, and what keeps them alive.
pub struct Infra {
    pub admin_url: String,
    pub redis_url: String,
    /// Containers are removed when this is dropped, at the end of the test.
    _containers: Option<containers::Pair>,
    /// Servers of this test alone, which it may crash and restart ([`private_infra`]).
    private: Option<Arc<Private>>,
}

/// A Postgres and Redis run for one test under their own folder: stopped, and the folder
/// removed, when the test ends.
struct Private {
    local: Option<oxigram_devinfra::LocalInfra>,
    dir: PathBuf,
}

impl Private {
    fn servers(&self) -> anyhow::Result<&oxigram_devinfra::LocalInfra> {
        self.local
            .as_ref()
            .context("the private servers are stopped")
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        if let Some(local) = self.local.take()
            && let Err(err) = local.stop()
        {
            eprintln!("infra: cannot stop the private servers: {err}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Postgres and Redis for this test alone (from Debian's packages, as `OXIGRAM_TEST_INFRA=
/// local` runs them), under a fresh folder on free ports, whatever the environment says: a
/// test that crashes and restarts them ([`System::restart_redis`],
/// [`System::restart_postgres`]) must not take down other tests' servers. The first start
/// creates a cluster, which takes a few seconds.
pub async fn private_infra() -> anyhow::Result<Infra> {
    let dir = std::env::temp_dir().join(unique_name("oxigram-private-infra"));
    let pg_port = free_port()?;
    let mut redis_port = free_port()?;
    while redis_port == pg_port {
        redis_port = free_port()?;
    }
    let options = oxigram_devinfra::InfraOptions {
        data_dir: dir.clone(),
        pg_port,
        redis_port,
        install_missing: true,
    };
    let started =
        tokio::task::spawn_blocking(move || oxigram_devinfra::LocalInfra::ensure_running(&options))
            .await?;
    let local = match started {
        Ok(local) => local,
        Err(err) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(err.into());
        }
    };
    eprintln!(
        "infra: private postgres on 127.0.0.1:{pg_port}, redis on 127.0.0.1:{redis_port}, under {}",
        dir.display()
    );
    Ok(Infra {
        admin_url: local.database_url.clone(),
        redis_url: local.redis_url.clone(),
        _containers: None,
        private: Some(Arc::new(Private {
            local: Some(local),
            dir,
        })),
    })
}

/// Where the suites get Postgres and Redis:
/// - `OXIGRAM_TEST_DATABASE_URL` + `OXIGRAM_TEST_REDIS_URL`: servers already running (the
///   developers' fast path);
/// - `OXIGRAM_TEST_INFRA=local`: a private Postgres and Redis under `$TMPDIR`, shared by
///   every test of the machine (no Docker needed);
/// - otherwise (CI): containers started for this test from the locally built
///   `oxigram-postgres:local` and `oxigram-redis:local` images (`scripts/build-images`).
pub async fn infra() -> anyhow::Result<Infra> {
    if let (Ok(db), Ok(redis)) = (
        std::env::var("OXIGRAM_TEST_DATABASE_URL"),
        std::env::var("OXIGRAM_TEST_REDIS_URL"),
    ) {
        return Ok(Infra {
            admin_url: db,
            redis_url: redis,
            _containers: None,
            private: None,
        });
    }
    if std::env::var("OXIGRAM_TEST_INFRA").as_deref() == Ok("local") {
        let options = oxigram_devinfra::InfraOptions {
            data_dir: std::env::temp_dir().join("oxigram-test-infra"),
            pg_port: 55433,
            redis_port: 56380,
            install_missing: true,
        };
        let local = tokio::task::spawn_blocking(move || {
            oxigram_devinfra::LocalInfra::ensure_running(&options)
        })
        .await??;
        return Ok(Infra {
            admin_url: local.database_url.clone(),
            redis_url: local.redis_url.clone(),
            _containers: None,
            private: None,
        });
    }
    let pair = containers::start().await?;
    Ok(Infra {
        admin_url: pair.postgres_url.clone(),
        redis_url: pair.redis_url.clone(),
        _containers: Some(pair),
        private: None,
    })
}

fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

/// Creates an empty database for one test; returns its URL.
pub async fn fresh_database(infra: &Infra) -> anyhow::Result<String> {
    let name = unique_name("t");
    let mut admin = PgConnection::connect(&infra.admin_url).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await?;
    let (base, _) = infra
        .admin_url
        .rsplit_once('/')
        .context("database URL without a database name")?;
    Ok(format!("{base}/{name}"))
}

/// A free port below the kernel's ephemeral range, where Docker's port mappings and outgoing
/// connections of concurrent tests take theirs, so a port picked now is still free at bind.
fn free_port() -> anyhow::Result<u16> {
    for _ in 0..200 {
        let port = rand::random_range(20_000..32_000);
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    anyhow::bail!("no free port in 20000..32000")
}

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
                let task = tokio::spawn(async move { oxigram::run(config, &[target], stop).await });
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

    /// The servers this system stands on when they are its own ([`System::start_private`]).
    fn private(&self) -> anyhow::Result<Arc<Private>> {
        self.infra
            .private
            .clone()
            .context("only a system on private servers (System::start_private) may restart them")
    }

    /// Kills Redis (SIGKILL) and starts it again, empty, on the same port; returns once it
    /// accepts connections.
    pub async fn restart_redis(&self) -> anyhow::Result<()> {
        let private = self.private()?;
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            Ok(private.servers()?.restart_redis()?)
        })
        .await?
    }

    /// Restarts Postgres with `pg_ctl restart -m immediate` (every connection drops
    /// mid-statement; the data stays); returns once it accepts connections.
    pub async fn restart_postgres(&self) -> anyhow::Result<()> {
        let private = self.private()?;
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            Ok(private.servers()?.restart_postgres_immediate()?)
        })
        .await?
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

/// The `oxigram` binary next to the test binary (`cargo build --bins` puts it there).
fn launcher() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .context("unexpected test binary location")?;
    let path = dir.join("oxigram");
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
            "OXIGRAM_UPDATES__RETAIN_PER_USER".into(),
            c.updates.retain_per_user.to_string(),
        ),
        ("OXIGRAM_MEDIA__BLOB_DIR".into(), c.media.blob_dir.clone()),
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
    ];
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
