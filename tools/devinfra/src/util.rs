//! Small helpers: running commands, probing processes and ports, reading logs.

use std::env;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::InfraError;

/// How long a freshly started server may take to accept connections.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Pause between two readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// At most this many bytes of command output are kept in error messages.
const MAX_OUTPUT: usize = 8 * 1024;

/// Renders a command line for messages (arguments with spaces are quoted).
pub(crate) fn command_line(cmd: &Command) -> String {
    let mut line = quote(cmd.get_program());
    for arg in cmd.get_args() {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    line
}

fn quote(s: &OsStr) -> String {
    let s = s.to_string_lossy();
    if s.is_empty() {
        "''".to_owned()
    } else if s.contains([' ', '"', '\'', '\t']) {
        format!("'{}'", s.replace('\'', r"'\''"))
    } else {
        s.into_owned()
    }
}

/// Describes how a process ended.
pub(crate) fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => status.to_string(),
    }
}

/// Runs `cmd` with captured output; a spawn failure or unsuccessful exit
/// becomes an [`InfraError`] carrying the output and `hint`.
pub(crate) fn run(cmd: &mut Command, hint: &str) -> Result<Output, InfraError> {
    cmd.stdin(Stdio::null());
    let line = command_line(cmd);
    let output = cmd
        .output()
        .map_err(|e| InfraError::io(format!("running `{line}`"), e))?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(InfraError::CommandFailed {
            command: line,
            status: describe_status(output.status),
            output: combined_output(&output),
            hint: hint.to_owned(),
        })
    }
}

/// Runs `cmd` with its stdout and stderr both going to our stderr, so a
/// person at the terminal sees its progress.
pub(crate) fn run_visible(cmd: &mut Command, hint: &str) -> Result<(), InfraError> {
    use std::os::fd::AsFd;
    let line = command_line(cmd);
    let err_fd = io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| InfraError::io("duplicating stderr", e))?;
    cmd.stdin(Stdio::null()).stdout(Stdio::from(err_fd));
    let status = cmd
        .status()
        .map_err(|e| InfraError::io(format!("running `{line}`"), e))?;
    if status.success() {
        Ok(())
    } else {
        Err(InfraError::CommandFailed {
            command: line,
            status: describe_status(status),
            output: "(its output is above)".to_owned(),
            hint: hint.to_owned(),
        })
    }
}

/// Stdout followed by stderr, lossily decoded and shortened to the last
/// [`MAX_OUTPUT`] bytes.
pub(crate) fn combined_output(output: &Output) -> String {
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    let err = String::from_utf8_lossy(&output.stderr);
    if !text.is_empty() && !err.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&err);
    keep_tail(text, MAX_OUTPUT)
}

fn keep_tail(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

/// The last `lines` lines of a (log) file; empty when it cannot be read.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(16 * 1024);
    if file.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    if file.read_to_end(&mut buf).is_err() {
        return String::new();
    }
    tail_lines(&String::from_utf8_lossy(&buf), lines)
}

/// The last `n` lines of `text`.
pub(crate) fn tail_lines(text: &str, n: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let from = all.len().saturating_sub(n);
    all[from..].join("\n")
}

/// Finds an executable called `name` on `PATH`.
pub(crate) fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// True for a regular file with an execute bit.
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Our effective user id, from `id -u` (std has no geteuid).
pub(crate) fn effective_uid() -> Result<u32, InfraError> {
    let out = run(Command::new("id").arg("-u"), "")?;
    parse_u32(&out.stdout).ok_or_else(|| {
        InfraError::io(
            "reading the output of `id -u`",
            io::Error::new(io::ErrorKind::InvalidData, "not a number"),
        )
    })
}

/// Parses trimmed ASCII digits.
pub(crate) fn parse_u32(bytes: &[u8]) -> Option<u32> {
    std::str::from_utf8(bytes).ok()?.trim().parse().ok()
}

/// What a pid from a pid file refers to now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcState {
    /// A live process with the expected name.
    Running,
    /// A zombie, or a live process of another program (the pid was reused).
    /// The pid file is stale, but `kill -0` would still succeed on it.
    Impostor,
    /// No such process.
    Gone,
}

/// Whether process `pid` exists and is not a zombie. When `comm` is given,
/// the process name must also start with it (guards against pid reuse).
pub(crate) fn process_alive(pid: u32, comm: Option<&str>) -> bool {
    process_state(pid, comm) == ProcState::Running
}

/// Classifies `pid` (see [`ProcState`]); `comm` as for [`process_alive`].
pub(crate) fn process_state(pid: u32, comm: Option<&str>) -> ProcState {
    if pid == 0 {
        return ProcState::Gone;
    }
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    if Path::new("/proc/self").exists() {
        let Ok(stat) = fs::read_to_string(proc_dir.join("stat")) else {
            return ProcState::Gone;
        };
        // Format: "pid (comm) S ..."; comm may contain spaces and parens.
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next());
        if matches!(state, Some("Z" | "X" | "x") | None) {
            // Dead but not reaped (containers whose init does not reap).
            return ProcState::Impostor;
        }
        let name_ok = match comm {
            Some(expected) => fs::read_to_string(proc_dir.join("comm"))
                .is_ok_and(|c| c.trim().starts_with(expected)),
            None => true,
        };
        if name_ok {
            ProcState::Running
        } else {
            ProcState::Impostor
        }
    } else {
        // No procfs: fall back to `kill -0`, which cannot check the name.
        let alive = Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if alive {
            ProcState::Running
        } else {
            ProcState::Gone
        }
    }
}

/// Reads a pid file (first line is the pid).
pub(crate) fn read_pid_file(path: &Path) -> Option<u32> {
    let text = fs::read_to_string(path).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// The loopback address with `port`.
pub(crate) fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
pub(crate) fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(&loopback(port), Duration::from_millis(500)).is_ok()
}

/// Sends `PING` to 127.0.0.1:`port` and reports whether `+PONG` came back.
pub(crate) fn redis_ping(port: u16) -> bool {
    redis_command(port, "PING")
        .map(|reply| reply.starts_with("+PONG"))
        .unwrap_or(false)
}

/// Sends one inline Redis command and returns the first reply line.
pub(crate) fn redis_command(port: u16, command: &str) -> io::Result<String> {
    let timeout = Duration::from_secs(1);
    let mut stream = TcpStream::connect_timeout(&loopback(port), timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(format!("{command}\r\n").as_bytes())?;
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while reply.len() < 512 {
        match stream.read(&mut byte)? {
            0 => break,
            _ if byte[0] == b'\n' => break,
            _ => reply.push(byte[0]),
        }
    }
    Ok(String::from_utf8_lossy(&reply).trim_end().to_owned())
}

/// Polls `probe` every 100 ms until it returns `Some`, or `timeout` passes.
pub(crate) fn poll_until<T>(timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(POLL_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_lines_keeps_the_end() {
        assert_eq!(tail_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail_lines("a", 5), "a");
        assert_eq!(tail_lines("", 5), "");
    }

    #[test]
    fn keep_tail_respects_char_boundaries() {
        let s = "ééééé".to_owned();
        let kept = keep_tail(s, 3);
        assert!(kept.starts_with('…'));
        assert!(kept.ends_with('é'));
    }

    #[test]
    fn command_line_quotes() {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--save", "", "--dir", "/a b"]);
        assert_eq!(command_line(&cmd), "redis-server --save '' --dir '/a b'");
    }

    #[test]
    fn own_process_is_alive() {
        assert!(process_alive(std::process::id(), None));
        assert!(!process_alive(0, None));
    }
}
