//! The private PostgreSQL cluster in data_dir/postgres.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::InfraError;
use crate::install::PgInstall;
use crate::util::{
    ProcState, READY_TIMEOUT, combined_output, command_line, describe_status, log_tail, poll_until,
    port_open, process_state, run,
};

/// Name of the superuser role, and of the database we create.
pub(crate) const DB_USER: &str = "oxigram";
/// Name of the application database.
pub(crate) const DB_NAME: &str = "oxigram";

/// Environment variables that would make the client tools connect somewhere
/// other than what we pass on their command lines.
const PG_ENV: [&str; 10] = [
    "PGDATA",
    "PGHOST",
    "PGHOSTADDR",
    "PGPORT",
    "PGUSER",
    "PGDATABASE",
    "PGOPTIONS",
    "PGSERVICE",
    "PGSERVICEFILE",
    "PGPASSFILE",
];

/// Our cluster: where it lives, which programs run it, and as whom.
#[derive(Debug, Clone)]
pub(crate) struct Postgres {
    /// The data folder (canonical).
    data_dir: PathBuf,
    /// data_dir/postgres
    cluster_dir: PathBuf,
    /// data_dir/logs/postgres.log
    log: PathBuf,
    /// Directory of initdb, pg_ctl, pg_isready, psql, createdb.
    bin_dir: PathBuf,
    /// True when we are root and must run initdb/pg_ctl as `postgres`.
    as_postgres_user: bool,
    /// The TCP port on 127.0.0.1.
    port: u16,
}

impl Postgres {
    /// Describes the cluster under `data_dir` and picks the server version
    /// that matches an existing cluster (or the highest for a new one).
    pub(crate) fn new(
        data_dir: &Path,
        port: u16,
        installs: &[PgInstall],
        euid: u32,
    ) -> Result<Self, InfraError> {
        let cluster_dir = data_dir.join("postgres");
        let bin_dir = choose_install(&cluster_dir, installs)?;
        Ok(Postgres {
            data_dir: data_dir.to_path_buf(),
            log: data_dir.join("logs").join("postgres.log"),
            cluster_dir,
            bin_dir,
            as_postgres_user: euid == 0,
            port,
        })
    }

    /// Makes sure the cluster exists, runs on our port, accepts connections
    /// and has the application database. Returns true when we started it.
    pub(crate) fn ensure_running(&self) -> Result<bool, InfraError> {
        let started = match self.running()? {
            // No port yet: someone else's start is still writing postmaster.pid.
            Some((_, port)) if port.is_none_or(|p| p == self.port) => {
                self.wait_ready()?;
                false
            }
            Some((pid, actual_port)) => {
                return Err(InfraError::RunningElsewhere {
                    service: "PostgreSQL",
                    pid,
                    actual_port,
                    wanted_port: self.port,
                    data_dir: self.data_dir.clone(),
                });
            }
            None => {
                if port_open(self.port) {
                    return Err(InfraError::PortInUse {
                        service: "PostgreSQL",
                        port: self.port,
                    });
                }
                if self.as_postgres_user {
                    self.check_traversable()?;
                }
                self.init_if_new()?;
                self.start()?;
                true
            }
        };
        if let Err(e) = self.ensure_database() {
            if started {
                let _ = self.stop();
            }
            return Err(e);
        }
        Ok(started)
    }

    /// Stops the cluster with `pg_ctl stop -m fast` and waits for it to exit.
    pub(crate) fn stop(&self) -> Result<(), InfraError> {
        if self.running()?.is_none() {
            return Ok(());
        }
        eprintln!("oxigram: stopping PostgreSQL on 127.0.0.1:{}", self.port);
        let mut cmd = self.server_command("pg_ctl");
        cmd.arg("-D")
            .arg(&self.cluster_dir)
            .args(["-m", "fast", "-w", "-t", "30", "stop"]);
        run(
            &mut cmd,
            &format!(
                "PostgreSQL did not stop; see {} and stop it by hand",
                self.log.display()
            ),
        )?;
        Ok(())
    }

    /// `pg_ctl restart -m immediate`: every server process quits at once without a checkpoint
    /// (a crash, as clients see it: their connections drop mid-statement), and the server
    /// starts again with the options it had, after crash recovery. Returns once it accepts
    /// connections.
    pub(crate) fn restart_immediate(&self) -> Result<(), InfraError> {
        eprintln!(
            "oxigram: restarting PostgreSQL on 127.0.0.1:{} (immediate)",
            self.port
        );
        let mut cmd = self.pg_ctl();
        cmd.args(["-m", "immediate", "-w", "-t"])
            .arg(READY_TIMEOUT.as_secs().to_string())
            .arg("restart");
        run(
            &mut cmd,
            &format!(
                "PostgreSQL did not restart; see {} and start it by hand",
                self.log.display()
            ),
        )?;
        self.wait_ready()
    }

    /// The postmaster of our cluster, if it is alive: its pid and port (from
    /// postmaster.pid). A postmaster.pid that would stop postgres from
    /// starting (zombie or reused pid) is removed.
    fn running(&self) -> Result<Option<(u32, Option<u16>)>, InfraError> {
        let pid_file = self.cluster_dir.join("postmaster.pid");
        let text = match fs::read_to_string(&pid_file) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(InfraError::io(format!("reading {}", pid_file.display()), e));
            }
        };
        let mut lines = text.lines();
        let pid = lines.next().and_then(|l| l.trim().parse::<u32>().ok());
        // Line 4 of postmaster.pid is the port.
        let port = lines.nth(2).and_then(|l| l.trim().parse::<u16>().ok());
        match pid.map(|pid| (pid, process_state(pid, Some("postgres")))) {
            Some((pid, ProcState::Running)) => Ok(Some((pid, port))),
            Some((_, ProcState::Gone)) => {
                // Left behind by a crash. postgres itself handles this case,
                // and its check of the old shared memory segment protects
                // against orphaned backends, so keep the file.
                Ok(None)
            }
            Some((_, ProcState::Impostor)) | None => {
                // A zombie postmaster or a reused pid would make postgres
                // refuse to start ("is another postmaster running?"), and so
                // would an unreadable file.
                fs::remove_file(&pid_file).map_err(|e| {
                    InfraError::io(format!("removing stale {}", pid_file.display()), e)
                })?;
                Ok(None)
            }
        }
    }

    /// Runs `initdb` when data_dir/postgres does not hold a cluster yet.
    ///
    /// initdb writes into a scratch directory that is renamed into place only
    /// on success, so an interrupted run never leaves a half-made cluster.
    fn init_if_new(&self) -> Result<(), InfraError> {
        if self.cluster_dir.join("PG_VERSION").exists() {
            return Ok(());
        }
        if self.cluster_dir.exists() {
            return Err(InfraError::BadDataDir {
                path: self.cluster_dir.clone(),
                problem:
                    "this directory exists but holds no PostgreSQL cluster (no PG_VERSION file)"
                        .to_owned(),
            });
        }
        eprintln!(
            "oxigram: initialising a new PostgreSQL cluster in {}",
            self.cluster_dir.display()
        );
        let scratch = self.data_dir.join("postgres.initdb-tmp");
        if scratch.exists() {
            fs::remove_dir_all(&scratch).map_err(|e| {
                InfraError::io(format!("removing leftover {}", scratch.display()), e)
            })?;
        }
        fs::create_dir(&scratch)
            .map_err(|e| InfraError::io(format!("creating {}", scratch.display()), e))?;
        fs::set_permissions(&scratch, fs::Permissions::from_mode(0o700)).map_err(|e| {
            InfraError::io(format!("setting permissions of {}", scratch.display()), e)
        })?;
        if self.as_postgres_user {
            chown_to_postgres(&scratch)?;
        }
        let mut cmd = self.server_command("initdb");
        cmd.arg("-D").arg(&scratch).args([
            "--auth=trust",
            "-U",
            DB_USER,
            "--encoding=UTF8",
            "--no-locale",
        ]);
        run(&mut cmd, "initdb could not create the cluster")?;
        fs::rename(&scratch, &self.cluster_dir).map_err(|e| {
            InfraError::io(
                format!(
                    "renaming {} to {}",
                    scratch.display(),
                    self.cluster_dir.display()
                ),
                e,
            )
        })?;
        Ok(())
    }

    /// `pg_ctl start -w`, then waits until `pg_isready` succeeds.
    fn start(&self) -> Result<(), InfraError> {
        eprintln!("oxigram: starting PostgreSQL on 127.0.0.1:{}", self.port);
        self.prepare_log()?;
        if self.as_postgres_user {
            chown_to_postgres(&self.cluster_dir)?;
        }
        // Outbox tables churn: autovacuum looks for their dead rows every few seconds.
        // A young cluster has no WAL segments to recycle, so it creates one every 16 MB of WAL,
        // and by default fills it with zeros first while holding the WAL write lock: every
        // commit of that moment waits for the whole segment to be written. Without the zero
        // fill the segment's blocks are allocated as WAL is written, and fdatasync still makes
        // them durable.
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' \
             -c max_connections=300 -c fsync=on -c autovacuum_naptime=5s -c wal_init_zero=off",
            self.port
        );
        let mut cmd = self.pg_ctl();
        cmd.arg("-o").arg(options).args([
            "-w",
            "-t",
            &READY_TIMEOUT.as_secs().to_string(),
            "start",
        ]);
        match run(&mut cmd, "PostgreSQL did not start") {
            Ok(_) => {}
            Err(InfraError::CommandFailed {
                command,
                status,
                output,
                hint,
            }) => {
                return Err(InfraError::CommandFailed {
                    command,
                    status,
                    output: format!(
                        "{}\n--- last lines of {} ---\n{}",
                        output.trim_end(),
                        self.log.display(),
                        log_tail(&self.log, 30)
                    ),
                    hint,
                });
            }
            Err(e) => return Err(e),
        }
        self.wait_ready()
    }

    /// Creates the log file and hands it to `postgres` (pg_ctl opens it as
    /// that user).
    fn prepare_log(&self) -> Result<(), InfraError> {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| InfraError::io(format!("creating {}", self.log.display()), e))?;
        if self.as_postgres_user {
            chown_to_postgres(&self.log)?;
        }
        Ok(())
    }

    /// Polls `pg_isready` until the server accepts connections.
    fn wait_ready(&self) -> Result<(), InfraError> {
        let port = self.port.to_string();
        let ready = poll_until(READY_TIMEOUT, || {
            let mut cmd = self.client_command("pg_isready");
            cmd.args(["-q", "-h", "127.0.0.1", "-p", &port, "-t", "2"])
                .args(["-U", DB_USER, "-d", "postgres"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            cmd.status().is_ok_and(|s| s.success()).then_some(())
        });
        ready.ok_or_else(|| InfraError::NotReady {
            service: "PostgreSQL",
            port: self.port,
            waited: READY_TIMEOUT,
            log: self.log.clone(),
            log_tail: log_tail(&self.log, 30),
        })
    }

    /// Creates the application database unless it exists.
    fn ensure_database(&self) -> Result<(), InfraError> {
        let port = self.port.to_string();
        let mut query = self.client_command("psql");
        query
            .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"])
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                DB_USER,
                "-d",
                "postgres",
            ])
            .arg("-c")
            .arg(format!(
                "select 1 from pg_database where datname = '{DB_NAME}'"
            ));
        let out = run(
            &mut query,
            "could not query the local PostgreSQL; is the server healthy? see its log",
        )?;
        if String::from_utf8_lossy(&out.stdout).trim() == "1" {
            return Ok(());
        }
        eprintln!("oxigram: creating database {DB_NAME}");
        let mut create = self.client_command("createdb");
        create.args(["-h", "127.0.0.1", "-p", &port, "-U", DB_USER, DB_NAME]);
        run(&mut create, "could not create the application database")?;
        Ok(())
    }

    /// Fails with [`InfraError::NotTraversable`] unless the `postgres` user
    /// can enter every directory from / down to data_dir/logs.
    fn check_traversable(&self) -> Result<(), InfraError> {
        let logs = self.data_dir.join("logs");
        let mut dirs: Vec<&Path> = logs.ancestors().collect();
        dirs.reverse();
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--", "sh", "-c"])
            .arg(r#"for d do [ -x "$d" ] || { printf '%s' "$d"; exit 3; }; done"#)
            .arg("oxigram-devinfra")
            .args(dirs)
            .current_dir("/");
        let line = command_line(&cmd);
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| InfraError::io(format!("running `{line}`"), e))?;
        if out.status.success() {
            return Ok(());
        }
        if out.status.code() == Some(3) {
            return Err(InfraError::NotTraversable {
                dir: PathBuf::from(String::from_utf8_lossy(&out.stdout).into_owned()),
                data_dir: self.data_dir.clone(),
            });
        }
        Err(InfraError::CommandFailed {
            command: line,
            status: describe_status(out.status),
            output: combined_output(&out),
            hint: "could not run a command as the `postgres` OS user; it is created by Debian's \
                   postgresql packages (`apt-get install postgresql`), and `runuser` comes with util-linux"
                .to_owned(),
        })
    }

    /// `pg_ctl` on this cluster, logging to its log file.
    fn pg_ctl(&self) -> Command {
        let mut cmd = self.server_command("pg_ctl");
        cmd.arg("-D")
            .arg(&self.cluster_dir)
            .arg("-l")
            .arg(&self.log);
        cmd
    }

    /// A server program (initdb, pg_ctl): run as `postgres` when we are root.
    fn server_command(&self, program: &str) -> Command {
        let exe = self.bin_dir.join(program);
        let mut cmd = if self.as_postgres_user {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(exe);
            cmd
        } else {
            Command::new(exe)
        };
        clean_env(&mut cmd);
        cmd
    }

    /// A client program (pg_isready, psql, createdb): run as ourselves.
    fn client_command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin_dir.join(program));
        clean_env(&mut cmd);
        cmd
    }
}

/// Neutral working directory (the `postgres` user may not be able to enter
/// ours), English messages, and no PG* variables.
fn clean_env(cmd: &mut Command) {
    cmd.current_dir("/").env("LC_ALL", "C");
    for var in PG_ENV {
        cmd.env_remove(var);
    }
}

/// `chown -R postgres:postgres path`.
fn chown_to_postgres(path: &Path) -> Result<(), InfraError> {
    let mut cmd = Command::new("chown");
    cmd.args(["-R", "postgres:postgres"]).arg(path);
    run(
        &mut cmd,
        "could not hand the directory to the `postgres` OS user; does it exist \
         (it is created by `apt-get install postgresql`)?",
    )?;
    Ok(())
}

/// The bin directory to use: the version that created an existing cluster,
/// else the highest installed version.
fn choose_install(cluster_dir: &Path, installs: &[PgInstall]) -> Result<PathBuf, InfraError> {
    let version_file = cluster_dir.join("PG_VERSION");
    let cluster_version = match fs::read_to_string(&version_file) {
        Ok(v) => v.trim().to_owned(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return installs.first().map(|i| i.bin_dir.clone()).ok_or_else(|| {
                InfraError::MissingBinaries {
                    missing: "the PostgreSQL server is".to_owned(),
                    hint: "run `sudo scripts/install-infra.sh`".to_owned(),
                }
            });
        }
        Err(e) => {
            return Err(InfraError::io(
                format!("reading {}", version_file.display()),
                e,
            ));
        }
    };
    let matching = installs
        .iter()
        .find(|i| i.version.as_deref() == Some(cluster_version.as_str()))
        // Outside Debian's layout we cannot tell the version; let postgres
        // itself complain if it does not match.
        .or_else(|| installs.iter().find(|i| i.version.is_none()));
    match matching {
        Some(install) => Ok(install.bin_dir.clone()),
        None => Err(InfraError::VersionMismatch {
            cluster_dir: cluster_dir.to_path_buf(),
            cluster_version,
            installed: installs.iter().filter_map(|i| i.version.clone()).collect(),
        }),
    }
}
