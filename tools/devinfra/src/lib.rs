//! Local development infrastructure for oxigram: makes sure a private
//! PostgreSQL cluster and a private Redis server are running under a data
//! folder (by default `./.oxigram`), for the newcomer command `oxigram up`
//! and for the test harness.
//!
//! [`LocalInfra::ensure_running`] installs the servers from Debian's packages
//! when they are missing, initialises the data folder when it is new, starts
//! whatever is not running yet and returns once both accept connections.
//! It is idempotent and may be called concurrently from many processes
//! (tests under cargo-nextest): calls on one data folder are serialised by an
//! exclusive lock on `data_dir/infra.lock`.
//!
//! Layout of the data folder:
//!
//! | path                  | content                                   |
//! |-----------------------|-------------------------------------------|
//! | `postgres/`           | the PostgreSQL cluster (owned by `postgres` when run as root) |
//! | `redis/`              | Redis' working directory and `redis.pid`  |
//! | `logs/postgres.log`   | PostgreSQL's log                          |
//! | `logs/redis.log`      | Redis' log                                |
//! | `infra.lock`          | the lock file                             |
//!
//! The servers listen on 127.0.0.1 only. PostgreSQL trusts every local
//! connection (role `oxigram`, database `oxigram`, no password); Redis keeps
//! nothing on disk. This is for development and tests, never for production.
//!
//! The crate uses only std and is synchronous (it runs external commands and
//! sleeps while polling); async callers should wrap it in `spawn_blocking`.
//! It targets Linux (Debian 12) and uses `/proc`, `runuser`, `chown`, `id`
//! and `kill`.
//!
//! ```no_run
//! use oxigram_devinfra::{InfraOptions, LocalInfra};
//!
//! let infra = LocalInfra::ensure_running(&InfraOptions::default())?;
//! println!("DATABASE_URL={}", infra.database_url);
//! println!("REDIS_URL={}", infra.redis_url);
//! # Ok::<(), oxigram_devinfra::InfraError>(())
//! ```

#![warn(missing_docs)]

mod error;
mod install;
mod postgres;
mod redis;
mod util;

use std::fs::{self, File, OpenOptions, TryLockError};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub use error::InfraError;

use crate::postgres::Postgres;
use crate::redis::Redis;

/// PostgreSQL port used when none is configured (not 5432, so it never
/// collides with a system cluster).
pub const DEFAULT_PG_PORT: u16 = 55432;

/// Redis port used when none is configured (not 6379, so it never collides
/// with a system Redis).
pub const DEFAULT_REDIS_PORT: u16 = 56379;

/// Where and how to run the local servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfraOptions {
    /// The data folder, e.g. `./.oxigram`: PostgreSQL's data goes to
    /// `data_dir/postgres`, Redis' to `data_dir/redis`, logs to
    /// `data_dir/logs`. Created when missing. When running as root, every
    /// parent directory must be enterable by the `postgres` OS user.
    pub data_dir: PathBuf,
    /// TCP port of PostgreSQL on 127.0.0.1 (default [`DEFAULT_PG_PORT`]).
    pub pg_port: u16,
    /// TCP port of Redis on 127.0.0.1 (default [`DEFAULT_REDIS_PORT`]).
    pub redis_port: u16,
    /// Whether to run `apt-get` (as root) when the server programs are
    /// missing; when false, missing programs are an error.
    pub install_missing: bool,
}

impl Default for InfraOptions {
    /// `.oxigram` in the current directory, ports 55432 and 56379, and
    /// installation of missing programs allowed.
    fn default() -> Self {
        InfraOptions {
            data_dir: PathBuf::from(".oxigram"),
            pg_port: DEFAULT_PG_PORT,
            redis_port: DEFAULT_REDIS_PORT,
            install_missing: true,
        }
    }
}

/// Running local PostgreSQL and Redis, as returned by
/// [`LocalInfra::ensure_running`].
///
/// Dropping it leaves the servers running; call [`LocalInfra::stop`] to stop
/// the ones this value started.
#[derive(Debug)]
pub struct LocalInfra {
    /// `postgres://oxigram@127.0.0.1:PORT/oxigram` (trust auth, no password).
    pub database_url: String,
    /// `redis://127.0.0.1:PORT`.
    pub redis_url: String,
    /// The canonical data folder (for locking in `stop`).
    data_dir: PathBuf,
    /// Our PostgreSQL cluster.
    postgres: Postgres,
    /// Our Redis.
    redis: Redis,
    /// Whether `ensure_running` started PostgreSQL.
    pg_started: bool,
    /// Whether `ensure_running` started Redis.
    redis_started: bool,
}

impl LocalInfra {
    /// Installs (when missing), initialises (when the data folder is new),
    /// and starts (when not already running) Postgres and Redis; returns once
    /// both accept connections.
    ///
    /// Idempotent and safe to call concurrently from many processes (tests run
    /// as separate processes under cargo-nextest): calls are serialised with
    /// an exclusive lock on `data_dir/infra.lock`. Progress lines go to
    /// stderr. Waits at most 30 s for each server to become ready.
    ///
    /// If Redis fails after this call started PostgreSQL, PostgreSQL is
    /// stopped again before the error is returned.
    pub fn ensure_running(opts: &InfraOptions) -> Result<LocalInfra, InfraError> {
        validate(opts)?;
        let euid = util::effective_uid()?;
        let data_dir = prepare_data_dir(&opts.data_dir, euid)?;
        let _lock = lock_data_dir(&data_dir)?;

        let binaries = install::locate(opts.install_missing, euid)?;
        let postgres = Postgres::new(&data_dir, opts.pg_port, &binaries.postgres, euid)?;
        let redis = Redis::new(&data_dir, opts.redis_port, &binaries.redis_server);

        let pg_started = postgres.ensure_running()?;
        let redis_started = match redis.ensure_running() {
            Ok(started) => started,
            Err(e) => {
                if pg_started {
                    let _ = postgres.stop();
                }
                return Err(e);
            }
        };

        Ok(LocalInfra {
            database_url: format!(
                "postgres://{}@127.0.0.1:{}/{}",
                postgres::DB_USER,
                opts.pg_port,
                postgres::DB_NAME
            ),
            redis_url: format!("redis://127.0.0.1:{}", opts.redis_port),
            data_dir,
            postgres,
            redis,
            pg_started,
            redis_started,
        })
    }

    /// Stops both servers cleanly (`pg_ctl stop -m fast`; SIGTERM to Redis)
    /// and waits until they have exited. Only stops what
    /// [`ensure_running`](Self::ensure_running) started in this call: servers
    /// that were already running are left alone.
    ///
    /// Both servers are attempted; the first error is returned.
    pub fn stop(self) -> Result<(), InfraError> {
        let _lock = lock_data_dir(&self.data_dir)?;
        let redis = if self.redis_started {
            self.redis.stop()
        } else {
            Ok(())
        };
        let postgres = if self.pg_started {
            self.postgres.stop()
        } else {
            Ok(())
        };
        redis.and(postgres)
    }

    /// Kills Redis with SIGKILL and starts it again on the same port, empty (it keeps
    /// nothing on disk): what clients see when Redis crashes and comes back. Returns once it
    /// answers `PING`. For tests of recovery; the caller must own these servers.
    pub fn restart_redis(&self) -> Result<(), InfraError> {
        let _lock = lock_data_dir(&self.data_dir)?;
        self.redis.restart_hard()
    }

    /// Restarts PostgreSQL with `pg_ctl restart -m immediate`: every connection drops
    /// mid-statement, and the server comes back after crash recovery with its data. Returns
    /// once it accepts connections. For tests of recovery; the caller must own these servers.
    pub fn restart_postgres_immediate(&self) -> Result<(), InfraError> {
        let _lock = lock_data_dir(&self.data_dir)?;
        self.postgres.restart_immediate()
    }

    /// True when this call started the servers (vs. found them running): at
    /// least one of PostgreSQL and Redis was started by
    /// [`ensure_running`](Self::ensure_running).
    pub fn started_here(&self) -> bool {
        self.pg_started || self.redis_started
    }
}

/// Rejects options that cannot work.
fn validate(opts: &InfraOptions) -> Result<(), InfraError> {
    let reason = if opts.data_dir.as_os_str().is_empty() {
        "data_dir is empty"
    } else if opts.pg_port == 0 || opts.redis_port == 0 {
        "ports must not be 0"
    } else if opts.pg_port == opts.redis_port {
        "PostgreSQL and Redis need different ports"
    } else {
        return Ok(());
    };
    Err(InfraError::InvalidOptions {
        reason: reason.to_owned(),
    })
}

/// Creates the data folder and its `logs` directory; returns the canonical
/// data folder. As root, directories we create are made world-enterable
/// (0755) so the `postgres` user can reach its cluster and log.
fn prepare_data_dir(data_dir: &Path, euid: u32) -> Result<PathBuf, InfraError> {
    let created = !data_dir.exists();
    fs::create_dir_all(data_dir)
        .map_err(|e| InfraError::io(format!("creating {}", data_dir.display()), e))?;
    let data_dir = fs::canonicalize(data_dir)
        .map_err(|e| InfraError::io(format!("resolving {}", data_dir.display()), e))?;
    if created && euid == 0 {
        set_mode(&data_dir, 0o755)?;
    }
    let logs = data_dir.join("logs");
    if !logs.exists() {
        fs::create_dir_all(&logs)
            .map_err(|e| InfraError::io(format!("creating {}", logs.display()), e))?;
        if euid == 0 {
            set_mode(&logs, 0o755)?;
        }
    }
    Ok(data_dir)
}

fn set_mode(path: &Path, mode: u32) -> Result<(), InfraError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| InfraError::io(format!("setting permissions of {}", path.display()), e))
}

/// Takes the exclusive lock on `data_dir/infra.lock`, waiting (and saying
/// so) while another process holds it. The lock is released when the
/// returned file is dropped.
fn lock_data_dir(data_dir: &Path) -> Result<File, InfraError> {
    let path = data_dir.join("infra.lock");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| InfraError::io(format!("opening {}", path.display()), e))?;
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(TryLockError::WouldBlock) => {
            eprintln!(
                "oxigram: waiting for another process that is setting up {}…",
                data_dir.display()
            );
        }
        Err(TryLockError::Error(e)) => {
            return Err(InfraError::io(format!("locking {}", path.display()), e));
        }
    }
    file.lock()
        .map_err(|e| InfraError::io(format!("locking {}", path.display()), e))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let opts = InfraOptions::default();
        assert_eq!(opts.data_dir, PathBuf::from(".oxigram"));
        assert_eq!(opts.pg_port, 55432);
        assert_eq!(opts.redis_port, 56379);
        assert!(opts.install_missing);
        assert!(validate(&opts).is_ok());
    }

    #[test]
    fn rejects_bad_options() {
        let same = InfraOptions {
            redis_port: DEFAULT_PG_PORT,
            ..InfraOptions::default()
        };
        assert!(matches!(
            validate(&same),
            Err(InfraError::InvalidOptions { .. })
        ));
        let zero = InfraOptions {
            pg_port: 0,
            ..InfraOptions::default()
        };
        assert!(validate(&zero).is_err());
    }

    #[test]
    fn errors_explain_what_to_do() {
        let e = InfraError::NotTraversable {
            dir: PathBuf::from("/root"),
            data_dir: PathBuf::from("/root/x/.oxigram"),
        };
        let text = e.to_string();
        assert!(text.contains("/root"));
        assert!(text.contains("chmod o+x"));
    }
}
