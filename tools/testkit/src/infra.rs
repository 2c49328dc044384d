//! The Postgres and Redis a test runs against: servers named by the environment, the shared
//! local ones under `$TMPDIR`, containers of the test's own, or private servers it may crash.

use std::{
    fs::File,
    net::TcpListener,
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
};

use anyhow::Context;
use sqlx::{Connection, PgConnection};

use crate::containers;

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

impl Infra {
    fn shared(admin_url: String, redis_url: String) -> Self {
        Self {
            admin_url,
            redis_url,
            _containers: None,
            private: None,
        }
    }

    /// The servers when they are this test's own ([`private_infra`]).
    fn private(&self) -> anyhow::Result<Arc<Private>> {
        self.private
            .clone()
            .context("only private servers (private_infra) may be restarted")
    }

    /// Kills Redis (SIGKILL) and starts it again, empty, on the same port; returns once it
    /// accepts connections. Private servers only.
    pub async fn restart_redis(&self) -> anyhow::Result<()> {
        let private = self.private()?;
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            Ok(private.servers()?.restart_redis()?)
        })
        .await?
    }

    /// Restarts Postgres with `pg_ctl restart -m immediate` (every connection drops
    /// mid-statement; the data stays); returns once it accepts connections. Private servers
    /// only.
    pub async fn restart_postgres(&self) -> anyhow::Result<()> {
        let private = self.private()?;
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            Ok(private.servers()?.restart_postgres_immediate()?)
        })
        .await?
    }
}

/// A Postgres and Redis for this test alone (from Debian's packages, as `OXIGRAM_TEST_INFRA=
/// local` runs them), under a fresh folder on free ports, whatever the environment says: a
/// test that crashes and restarts them ([`Infra::restart_redis`], [`Infra::restart_postgres`])
/// must not take down other tests' servers. The first start creates a cluster, which takes a
/// few seconds.
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

/// Where tests get Postgres and Redis:
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
        return Ok(Infra::shared(db, redis));
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
        return Ok(Infra::shared(local.database_url, local.redis_url));
    }
    let pair = containers::start().await?;
    Ok(Infra {
        admin_url: pair.postgres_url.clone(),
        redis_url: pair.redis_url.clone(),
        _containers: Some(pair),
        private: None,
    })
}

/// `prefix_<pid>_<random>`: a name no other test of this machine uses (databases, folders,
/// Redis key prefixes).
pub fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

/// Creates an empty database for one test; returns its URL. The databases of tests whose
/// process has ended are dropped first: a server shared by many runs keeps only the live ones.
pub async fn fresh_database(infra: &Infra) -> anyhow::Result<String> {
    let name = unique_name("t");
    let mut admin = PgConnection::connect(&infra.admin_url).await?;
    drop_databases_of_ended_tests(&mut admin).await;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await?;
    let (base, _) = infra
        .admin_url
        .rsplit_once('/')
        .context("database URL without a database name")?;
    Ok(format!("{base}/{name}"))
}

/// Drops every `t_<pid>_<random>` database whose process is gone (names from
/// [`unique_name`]). Best effort: a database another test is dropping at the same moment, or
/// one in use, is left for the next test.
async fn drop_databases_of_ended_tests(admin: &mut PgConnection) {
    let names: Vec<String> =
        match sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 't\\_%'")
            .fetch_all(&mut *admin)
            .await
        {
            Ok(names) => names,
            Err(_) => return,
        };
    for name in names {
        let pid = name.split('_').nth(1).and_then(|p| p.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let drop = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        let _ = sqlx::query(sqlx::AssertSqlSafe(drop))
            .execute(&mut *admin)
            .await;
    }
}

/// The ports this process claimed, each by a lock on its file under `$TMPDIR/oxigram-ports`:
/// held until the process exits (nextest runs one test per process), when the kernel releases
/// them, a crash included.
static PORT_CLAIMS: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// A free port below the kernel's ephemeral range, where Docker's port mappings and outgoing
/// connections of concurrent tests take theirs, so a port picked now is still free at bind.
/// Concurrent tests pick from the same range and bind a while after picking: each port is
/// claimed for this process (see [`PORT_CLAIMS`]), so no other test picks it meanwhile.
pub fn free_port() -> anyhow::Result<u16> {
    let dir = std::env::temp_dir().join("oxigram-ports");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for _ in 0..200 {
        let port = rand::random_range(20_000..32_000);
        let claim = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(port.to_string()))?;
        if claim.try_lock().is_err() {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            PORT_CLAIMS
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(claim);
            return Ok(port);
        }
    }
    anyhow::bail!("no free port in 20000..32000")
}
