//! The error type of this crate; every message says what to do about it.

use std::error::Error;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while installing, initialising, starting or
/// stopping the local PostgreSQL and Redis.
///
/// The [`Display`](fmt::Display) text is meant for a human at a terminal: it
/// names what failed and suggests the next step.
#[derive(Debug)]
#[non_exhaustive]
pub enum InfraError {
    /// The [`InfraOptions`](crate::InfraOptions) are unusable (for example
    /// port 0, or the same port for both servers).
    InvalidOptions {
        /// What is wrong with them.
        reason: String,
    },
    /// A file system or process operation failed.
    Io {
        /// What we were doing, e.g. "creating /x/.oxigram/logs".
        action: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The server programs are not installed and we may not (or cannot)
    /// install them.
    MissingBinaries {
        /// Which programs are missing.
        missing: String,
        /// How to install them.
        hint: String,
    },
    /// An external command exited unsuccessfully.
    CommandFailed {
        /// The command line that was run.
        command: String,
        /// How it ended (exit code or signal).
        status: String,
        /// Its captured standard output and standard error (possibly
        /// shortened), or a pointer to where its output went.
        output: String,
        /// What to do about it.
        hint: String,
    },
    /// We run as root, so PostgreSQL runs as the `postgres` OS user, but that
    /// user cannot enter a directory on the way to the data folder.
    NotTraversable {
        /// The first directory the `postgres` user cannot enter.
        dir: PathBuf,
        /// The data folder we were asked to use.
        data_dir: PathBuf,
    },
    /// Something other than our server already listens on the port.
    PortInUse {
        /// "PostgreSQL" or "Redis".
        service: &'static str,
        /// The busy port.
        port: u16,
    },
    /// Our server for this data folder is running, but not on the requested
    /// port (or it does not answer there).
    RunningElsewhere {
        /// "PostgreSQL" or "Redis".
        service: &'static str,
        /// Process id of the running server.
        pid: u32,
        /// The port it listens on, when known.
        actual_port: Option<u16>,
        /// The port we were asked to use.
        wanted_port: u16,
        /// The data folder it serves.
        data_dir: PathBuf,
    },
    /// A server was started but did not accept connections in time.
    NotReady {
        /// "PostgreSQL" or "Redis".
        service: &'static str,
        /// The port we waited on.
        port: u16,
        /// How long we waited.
        waited: Duration,
        /// The server's log file.
        log: PathBuf,
        /// The last lines of that log file.
        log_tail: String,
    },
    /// Something in the data folder is not what we expect (for example a
    /// `postgres` directory that is not a PostgreSQL cluster).
    BadDataDir {
        /// The offending path.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The PostgreSQL cluster in the data folder was created by a major
    /// version that is not installed.
    VersionMismatch {
        /// The cluster directory (data_dir/postgres).
        cluster_dir: PathBuf,
        /// The major version recorded in its `PG_VERSION` file.
        cluster_version: String,
        /// The installed major versions.
        installed: Vec<String>,
    },
}

impl InfraError {
    /// Builds an [`InfraError::Io`] from an action description and an error.
    pub(crate) fn io(action: impl Into<String>, source: io::Error) -> Self {
        InfraError::Io {
            action: action.into(),
            source,
        }
    }
}

impl fmt::Display for InfraError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InfraError::InvalidOptions { reason } => {
                write!(f, "invalid local infrastructure options: {reason}")
            }
            InfraError::Io { action, source } => {
                write!(f, "error while {action}: {source}")?;
                match source.kind() {
                    io::ErrorKind::PermissionDenied => write!(
                        f,
                        "; check the permissions of that path, or choose another data folder"
                    ),
                    io::ErrorKind::NotFound => {
                        write!(f, "; is the program installed and on PATH?")
                    }
                    _ => Ok(()),
                }
            }
            InfraError::MissingBinaries { missing, hint } => {
                write!(f, "{missing} not installed; {hint}")
            }
            InfraError::CommandFailed {
                command,
                status,
                output,
                hint,
            } => {
                write!(f, "command `{command}` failed ({status})")?;
                if !hint.is_empty() {
                    write!(f, "; {hint}")?;
                }
                let output = output.trim();
                if !output.is_empty() {
                    write!(f, "\n--- output ---\n{output}")?;
                }
                Ok(())
            }
            InfraError::NotTraversable { dir, data_dir } => write!(
                f,
                "the `postgres` OS user cannot enter {dir} (needed to reach the data folder {data_dir}). \
                 Because we run as root, PostgreSQL runs as `postgres`, which needs execute (search) \
                 permission on every parent directory of the data folder. Either choose a data folder \
                 outside it (for example under /var/tmp or /srv) or run `chmod o+x {dir}`",
                dir = dir.display(),
                data_dir = data_dir.display()
            ),
            InfraError::PortInUse { service, port } => write!(
                f,
                "cannot start {service}: another program already listens on 127.0.0.1:{port}. \
                 Stop that program or choose another {service} port"
            ),
            InfraError::RunningElsewhere {
                service,
                pid,
                actual_port,
                wanted_port,
                data_dir,
            } => {
                write!(
                    f,
                    "{service} for data folder {} is already running (pid {pid})",
                    data_dir.display()
                )?;
                match actual_port {
                    Some(p) => write!(f, " on port {p}")?,
                    None => write!(f, " but does not answer on port {wanted_port}")?,
                }
                write!(
                    f,
                    ", not on the requested port {wanted_port}. Use the port it runs on, or stop it \
                     first (`kill {pid}`) so it can be restarted on port {wanted_port}"
                )
            }
            InfraError::NotReady {
                service,
                port,
                waited,
                log,
                log_tail,
            } => {
                write!(
                    f,
                    "{service} did not accept connections on 127.0.0.1:{port} within {}s; \
                     see its log {}",
                    waited.as_secs(),
                    log.display()
                )?;
                let tail = log_tail.trim();
                if tail.is_empty() {
                    write!(f, " (it is empty)")
                } else {
                    write!(f, "; last lines:\n{tail}")
                }
            }
            InfraError::BadDataDir { path, problem } => write!(
                f,
                "{}: {problem}; delete it to start over with an empty database, \
                 or choose another data folder",
                path.display()
            ),
            InfraError::VersionMismatch {
                cluster_dir,
                cluster_version,
                installed,
            } => {
                let installed = if installed.is_empty() {
                    "none".to_owned()
                } else {
                    installed.join(", ")
                };
                write!(
                    f,
                    "the PostgreSQL cluster in {} was created by PostgreSQL {cluster_version}, but \
                     the installed server versions are: {installed}. Install it with \
                     `apt-get install postgresql-{cluster_version}`, or delete {} to start over \
                     with an empty database",
                    cluster_dir.display(),
                    cluster_dir.display()
                )
            }
        }
    }
}

impl Error for InfraError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            InfraError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
