//! The private Redis server in data_dir/redis.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::InfraError;
use crate::util::{
    READY_TIMEOUT, log_tail, poll_until, port_open, process_alive, read_pid_file, redis_ping, run,
};

/// Process name of the Redis server (guards against pid reuse).
const COMM: &str = "redis-server";

/// Our Redis: where it keeps its files and which port it listens on.
#[derive(Debug, Clone)]
pub(crate) struct Redis {
    /// The data folder (canonical).
    data_dir: PathBuf,
    /// data_dir/redis (its working directory).
    dir: PathBuf,
    /// data_dir/redis/redis.pid
    pid_file: PathBuf,
    /// data_dir/logs/redis.log
    log: PathBuf,
    /// The `redis-server` executable.
    server: PathBuf,
    /// The TCP port on 127.0.0.1.
    port: u16,
}

impl Redis {
    /// Describes the Redis under `data_dir`.
    pub(crate) fn new(data_dir: &Path, port: u16, server: &Path) -> Self {
        let dir = data_dir.join("redis");
        Redis {
            data_dir: data_dir.to_path_buf(),
            pid_file: dir.join("redis.pid"),
            dir,
            log: data_dir.join("logs").join("redis.log"),
            server: server.to_path_buf(),
            port,
        }
    }

    /// Makes sure our Redis runs on our port and answers `PING`. Returns true
    /// when we started it.
    pub(crate) fn ensure_running(&self) -> Result<bool, InfraError> {
        match self.running()? {
            Some(pid) => {
                if !redis_ping(self.port) {
                    if let Some(actual) = listening_port(pid).filter(|p| *p != self.port) {
                        return Err(self.elsewhere(pid, Some(actual)));
                    }
                    // Perhaps still starting up.
                    if !self.wait_ready(pid)? {
                        return Err(self.elsewhere(pid, None));
                    }
                }
                Ok(false)
            }
            None => {
                if port_open(self.port) {
                    return Err(InfraError::PortInUse {
                        service: "Redis",
                        port: self.port,
                    });
                }
                self.start()?;
                Ok(true)
            }
        }
    }

    /// Stops our Redis (SIGTERM; it saves nothing since persistence is off)
    /// and waits until it has exited.
    pub(crate) fn stop(&self) -> Result<(), InfraError> {
        let Some(pid) = self.running()? else {
            return Ok(());
        };
        eprintln!("oxigram: stopping Redis on 127.0.0.1:{}", self.port);
        let mut kill = Command::new("kill");
        kill.args(["-TERM", &pid.to_string()]);
        if let Err(e) = run(&mut kill, "") {
            // It may have exited on its own in the meantime.
            if process_alive(pid, Some(COMM)) {
                return Err(e);
            }
        }
        let gone = poll_until(READY_TIMEOUT, || {
            (!process_alive(pid, Some(COMM))).then_some(())
        });
        if gone.is_none() {
            return Err(InfraError::CommandFailed {
                command: format!("kill -TERM {pid}"),
                status: format!("Redis still running after {}s", READY_TIMEOUT.as_secs()),
                output: log_tail(&self.log, 20),
                hint: format!("stop it by hand with `kill -9 {pid}`"),
            });
        }
        Ok(())
    }

    /// Kills our Redis with SIGKILL (a crash: nothing is saved, its data is gone), waits until
    /// it has exited, and starts it again, empty, on the same port. Returns once it answers
    /// `PING`.
    pub(crate) fn restart_hard(&self) -> Result<(), InfraError> {
        if let Some(pid) = self.running()? {
            eprintln!("oxigram: killing Redis on 127.0.0.1:{}", self.port);
            let mut kill = Command::new("kill");
            kill.args(["-KILL", &pid.to_string()]);
            if let Err(e) = run(&mut kill, "")
                && process_alive(pid, Some(COMM))
            {
                return Err(e);
            }
            let gone = poll_until(READY_TIMEOUT, || {
                (!process_alive(pid, Some(COMM)) && !port_open(self.port)).then_some(())
            });
            if gone.is_none() {
                return Err(InfraError::CommandFailed {
                    command: format!("kill -KILL {pid}"),
                    status: format!(
                        "Redis still running or its port still open after {}s",
                        READY_TIMEOUT.as_secs()
                    ),
                    output: log_tail(&self.log, 20),
                    hint: format!("look for what holds 127.0.0.1:{}", self.port),
                });
            }
            // A killed daemon leaves its pid file behind.
            remove_if_exists(&self.pid_file)?;
        }
        self.start()
    }

    /// The pid of our Redis, if it is alive. A stale pid file is removed.
    fn running(&self) -> Result<Option<u32>, InfraError> {
        match read_pid_file(&self.pid_file) {
            Some(pid) if process_alive(pid, Some(COMM)) => Ok(Some(pid)),
            Some(_) => {
                remove_if_exists(&self.pid_file)?;
                Ok(None)
            }
            None => {
                // Absent, or unreadable garbage from a crash.
                remove_if_exists(&self.pid_file)?;
                Ok(None)
            }
        }
    }

    /// Starts a daemonised `redis-server` and waits for `PONG`.
    fn start(&self) -> Result<(), InfraError> {
        eprintln!("oxigram: starting Redis on 127.0.0.1:{}", self.port);
        fs::create_dir_all(&self.dir)
            .map_err(|e| InfraError::io(format!("creating {}", self.dir.display()), e))?;
        let mut cmd = Command::new(&self.server);
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--daemonize", "yes"])
            .arg("--pidfile")
            .arg(&self.pid_file)
            .arg("--logfile")
            .arg(&self.log)
            .args(["--appendonly", "no", "--save", ""])
            .current_dir(&self.dir);
        run(&mut cmd, "redis-server refused to start")?;

        // Wait for PONG; give up early if the daemon has already died.
        let ready = poll_until(READY_TIMEOUT, || {
            if redis_ping(self.port) {
                return Some(true);
            }
            match read_pid_file(&self.pid_file) {
                Some(pid) if !process_alive(pid, Some(COMM)) => Some(false),
                _ => None,
            }
        }) == Some(true);
        if ready {
            Ok(())
        } else {
            Err(InfraError::NotReady {
                service: "Redis",
                port: self.port,
                waited: READY_TIMEOUT,
                log: self.log.clone(),
                log_tail: log_tail(&self.log, 30),
            })
        }
    }

    /// Polls `PING` until it answers (true), the process dies or the timeout
    /// passes (false).
    fn wait_ready(&self, pid: u32) -> Result<bool, InfraError> {
        let outcome = poll_until(READY_TIMEOUT, || {
            if redis_ping(self.port) {
                Some(true)
            } else if !process_alive(pid, Some(COMM)) {
                Some(false)
            } else {
                None
            }
        });
        Ok(outcome == Some(true))
    }

    fn elsewhere(&self, pid: u32, actual_port: Option<u16>) -> InfraError {
        InfraError::RunningElsewhere {
            service: "Redis",
            pid,
            actual_port,
            wanted_port: self.port,
            data_dir: self.data_dir.clone(),
        }
    }
}

fn remove_if_exists(path: &Path) -> Result<(), InfraError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(InfraError::io(
            format!("removing stale {}", path.display()),
            e,
        )),
    }
}

/// The port a running redis-server advertises in its process title
/// ("/usr/bin/redis-server 127.0.0.1:56379"), if readable.
fn listening_port(pid: u32) -> Option<u16> {
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    parse_title_port(&String::from_utf8_lossy(&cmdline))
}

fn parse_title_port(title: &str) -> Option<u16> {
    let title = title.trim_end_matches('\0');
    let first = title.split(['\0', ' ']).nth(1)?;
    first.rsplit_once(':')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_port() {
        assert_eq!(
            parse_title_port("/usr/bin/redis-server 127.0.0.1:56379\0\0\0"),
            Some(56379)
        );
        assert_eq!(parse_title_port("/usr/bin/redis-server *:6379"), Some(6379));
        assert_eq!(parse_title_port("redis-server\0--port\0"), None);
    }
}
