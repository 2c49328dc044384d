//! End-to-end tests: really install (when missing), initialise, start and
//! stop PostgreSQL and Redis in throw-away data folders under /tmp, on free
//! ports.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oxigram_devinfra::{InfraError, InfraOptions, LocalInfra};

/// Test error that prints its message verbatim (so multi-line errors with
/// log tails stay readable).
struct Failure(String);

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

type TestResult = Result<(), Failure>;

fn fail(msg: impl Into<String>) -> Failure {
    Failure(msg.into())
}

/// Stops whatever is still registered and removes the data folder, also when
/// a test fails half-way.
struct Cleanup {
    infras: Vec<LocalInfra>,
    dir: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for infra in self.infras.drain(..) {
            if let Err(e) = infra.stop() {
                eprintln!("cleanup: {e}");
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A data folder path under /tmp that nobody else uses.
fn unique_dir(tag: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    PathBuf::from(format!(
        "/tmp/oxigram-devinfra-{tag}-{}-{nanos}",
        std::process::id()
    ))
}

/// Two distinct free ports (bound to 127.0.0.1:0 together, then released).
fn free_ports() -> io::Result<(u16, u16)> {
    let a = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let b = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

/// A fresh data folder on free ports; the cleanup stops its servers and removes it.
fn scratch(name: &str) -> Result<(InfraOptions, Cleanup), Failure> {
    let dir = unique_dir(name);
    let (pg_port, redis_port) = free_ports()?;
    let cleanup = Cleanup {
        infras: Vec::new(),
        dir: dir.clone(),
    };
    Ok((options(&dir, pg_port, redis_port), cleanup))
}

fn options(dir: &Path, pg_port: u16, redis_port: u16) -> InfraOptions {
    InfraOptions {
        data_dir: dir.to_path_buf(),
        pg_port,
        redis_port,
        install_missing: true,
    }
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

fn accepts(port: u16) -> bool {
    TcpStream::connect_timeout(&addr(port), Duration::from_secs(1)).is_ok()
}

/// Sends `PING`, returns the reply line.
fn redis_ping(port: u16) -> io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr(port), Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.write_all(b"PING\r\n")?;
    let mut buf = [0u8; 64];
    let n = stream.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).trim_end().to_owned())
}

/// Sends a PostgreSQL SSLRequest; a PostgreSQL server answers a single
/// byte, 'N' (no SSL configured) or 'S'.
fn speaks_postgres(port: u16) -> io::Result<bool> {
    let mut stream = TcpStream::connect_timeout(&addr(port), Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut request = Vec::with_capacity(8);
    request.extend_from_slice(&8u32.to_be_bytes());
    request.extend_from_slice(&80_877_103u32.to_be_bytes());
    stream.write_all(&request)?;
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer)?;
    Ok(matches!(answer[0], b'N' | b'S'))
}

fn assert_up(infra: &LocalInfra, pg_port: u16, redis_port: u16) -> TestResult {
    if infra.database_url != format!("postgres://oxigram@127.0.0.1:{pg_port}/oxigram") {
        return Err(fail(format!(
            "unexpected database_url {}",
            infra.database_url
        )));
    }
    if infra.redis_url != format!("redis://127.0.0.1:{redis_port}") {
        return Err(fail(format!("unexpected redis_url {}", infra.redis_url)));
    }
    if !speaks_postgres(pg_port)? {
        return Err(fail(format!("port {pg_port} does not speak PostgreSQL")));
    }
    let pong = redis_ping(redis_port)?;
    if pong != "+PONG" {
        return Err(fail(format!("Redis answered {pong:?} to PING")));
    }
    Ok(())
}

#[test]
fn ensure_running_is_idempotent_and_stop_stops() -> TestResult {
    let (opts, mut cleanup) = scratch("up")?;
    let (dir, pg_port, redis_port) = (opts.data_dir.clone(), opts.pg_port, opts.redis_port);

    // Fresh folder: installs if needed, initialises, starts.
    let first = LocalInfra::ensure_running(&opts)?;
    assert!(first.started_here(), "a fresh data folder must be started");
    assert_up(&first, pg_port, redis_port)?;
    assert!(dir.join("postgres").join("PG_VERSION").is_file());
    assert!(dir.join("logs").join("postgres.log").is_file());
    assert!(dir.join("logs").join("redis.log").is_file());
    cleanup.infras.push(first);

    // Second call finds both running.
    let second = LocalInfra::ensure_running(&opts)?;
    assert!(!second.started_here(), "servers were already running");
    assert_up(&second, pg_port, redis_port)?;

    // Stopping the second handle must not stop what the first one started.
    second.stop()?;
    assert!(
        accepts(pg_port),
        "PostgreSQL stopped by a handle that did not start it"
    );
    assert!(
        accepts(redis_port),
        "Redis stopped by a handle that did not start it"
    );

    let first = cleanup
        .infras
        .pop()
        .ok_or_else(|| fail("first handle missing"))?;
    first.stop()?;
    assert!(
        !accepts(pg_port),
        "PostgreSQL still accepts connections after stop"
    );
    assert!(
        !accepts(redis_port),
        "Redis still accepts connections after stop"
    );

    // An existing (stopped) data folder starts again without initdb.
    let third = LocalInfra::ensure_running(&opts)?;
    assert!(third.started_here());
    assert_up(&third, pg_port, redis_port)?;
    third.stop()?;
    assert!(!accepts(pg_port));
    assert!(!accepts(redis_port));
    Ok(())
}

#[test]
fn concurrent_callers_start_once() -> TestResult {
    const CALLERS: usize = 4;
    let (opts, mut cleanup) = scratch("concurrent")?;
    let (pg_port, redis_port) = (opts.pg_port, opts.redis_port);

    let barrier = Arc::new(Barrier::new(CALLERS));
    let handles: Vec<_> = (0..CALLERS)
        .map(|_| {
            let opts = opts.clone();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                LocalInfra::ensure_running(&opts)
            })
        })
        .collect();
    let mut errors = Vec::new();
    for handle in handles {
        match handle.join() {
            Ok(Ok(infra)) => cleanup.infras.push(infra),
            Ok(Err(e)) => errors.push(e.to_string()),
            Err(_) => errors.push("caller panicked".to_owned()),
        }
    }
    if !errors.is_empty() {
        return Err(fail(errors.join("\n")));
    }
    let starters = cleanup.infras.iter().filter(|i| i.started_here()).count();
    assert_eq!(starters, 1, "exactly one caller must start the servers");
    for infra in &cleanup.infras {
        assert_up(infra, pg_port, redis_port)?;
    }
    for infra in cleanup.infras.drain(..) {
        infra.stop()?;
    }
    assert!(!accepts(pg_port));
    assert!(!accepts(redis_port));
    Ok(())
}

#[test]
fn busy_redis_port_is_reported_and_postgres_rolled_back() -> TestResult {
    let dir = unique_dir("busy");
    let _cleanup = Cleanup {
        infras: Vec::new(),
        dir: dir.clone(),
    };
    let squatter = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let redis_port = squatter.local_addr()?.port();
    let (pg_port, _) = free_ports()?;
    if pg_port == redis_port {
        return Err(fail("port allocation collided; rerun"));
    }

    match LocalInfra::ensure_running(&options(&dir, pg_port, redis_port)) {
        Err(
            e @ InfraError::PortInUse {
                service: "Redis", ..
            },
        ) => {
            let text = e.to_string();
            eprintln!("as expected: {text}");
            assert!(text.contains(&redis_port.to_string()), "{text}");
        }
        Err(e) => return Err(fail(format!("expected PortInUse for Redis, got: {e}"))),
        Ok(infra) => {
            let _ = infra.stop();
            return Err(fail("expected an error for the busy Redis port"));
        }
    }
    assert!(
        !accepts(pg_port),
        "PostgreSQL started by the failed call must be stopped again"
    );
    Ok(())
}

#[test]
fn invalid_options_are_rejected() {
    let opts = InfraOptions {
        data_dir: unique_dir("invalid"),
        pg_port: 40000,
        redis_port: 40000,
        install_missing: false,
    };
    match LocalInfra::ensure_running(&opts) {
        Err(InfraError::InvalidOptions { .. }) => {}
        other => panic!("expected InvalidOptions, got {other:?}"),
    }
    assert!(!opts.data_dir.exists());
}

/// Our effective uid, via `id -u`.
fn euid() -> Result<u32, Failure> {
    let out = std::process::Command::new("id").arg("-u").output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

#[test]
fn unreachable_data_dir_is_explained_when_root() -> TestResult {
    if euid()? != 0 {
        eprintln!("skipped: only root runs PostgreSQL as the `postgres` user");
        return Ok(());
    }
    use std::os::unix::fs::PermissionsExt;
    let private = unique_dir("private");
    let _cleanup = Cleanup {
        infras: Vec::new(),
        dir: private.clone(),
    };
    std::fs::create_dir(&private)?;
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))?;
    let (pg_port, redis_port) = free_ports()?;
    let opts = options(&private.join("data"), pg_port, redis_port);
    match LocalInfra::ensure_running(&opts) {
        Err(e @ InfraError::NotTraversable { .. }) => {
            eprintln!("as expected: {e}");
            let InfraError::NotTraversable { dir, .. } = e else {
                unreachable!()
            };
            assert_eq!(dir, private);
            Ok(())
        }
        Err(e) => Err(fail(format!("expected NotTraversable, got: {e}"))),
        Ok(infra) => {
            let _ = infra.stop();
            Err(fail("expected NotTraversable, but the servers started"))
        }
    }
}

/// First line of a pid file.
fn pid_from(path: &Path) -> Result<u32, Failure> {
    let text = std::fs::read_to_string(path)?;
    Ok(text.lines().next().unwrap_or_default().trim().parse()?)
}

#[test]
fn recovers_after_servers_were_killed() -> TestResult {
    let (opts, mut cleanup) = scratch("crash")?;
    let (dir, pg_port, redis_port) = (opts.data_dir.clone(), opts.pg_port, opts.redis_port);

    let first = LocalInfra::ensure_running(&opts)?;
    assert!(first.started_here());
    // Simulate a crash: SIGKILL leaves postmaster.pid and redis.pid behind.
    let pg_pid = pid_from(&dir.join("postgres").join("postmaster.pid"))?;
    let redis_pid = pid_from(&dir.join("redis").join("redis.pid"))?;
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pg_pid.to_string(), &redis_pid.to_string()])
        .status()?;
    assert!(status.success());
    drop(first); // nothing left to stop
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while (accepts(pg_port) || accepts(redis_port)) && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(100));
    }
    // Give the orphaned PostgreSQL backends a moment to notice and exit.
    thread::sleep(Duration::from_secs(1));

    let again = LocalInfra::ensure_running(&opts)?;
    assert!(again.started_here(), "killed servers must be started again");
    assert_up(&again, pg_port, redis_port)?;
    cleanup.infras.push(again);
    Ok(())
}

/// Sends one inline Redis command, returns the reply line.
fn redis_command(port: u16, command: &str) -> io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr(port), Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.write_all(format!("{command}\r\n").as_bytes())?;
    let mut buf = [0u8; 64];
    let n = stream.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).trim_end().to_owned())
}

#[test]
fn restarts_come_back_on_the_same_ports() -> TestResult {
    let (opts, mut cleanup) = scratch("restart")?;
    let (dir, pg_port, redis_port) = (opts.data_dir.clone(), opts.pg_port, opts.redis_port);
    let infra = LocalInfra::ensure_running(&opts)?;
    assert!(infra.started_here());

    // Redis comes back on its port, empty: a crash keeps nothing.
    let set = redis_command(redis_port, "SET restart-probe 1")?;
    if set != "+OK" {
        return Err(fail(format!("Redis answered {set:?} to SET")));
    }
    let old_redis = pid_from(&dir.join("redis").join("redis.pid"))?;
    infra.restart_redis()?;
    let new_redis = pid_from(&dir.join("redis").join("redis.pid"))?;
    assert_ne!(old_redis, new_redis, "Redis was not restarted");
    let probe = redis_command(redis_port, "EXISTS restart-probe")?;
    if probe != ":0" {
        return Err(fail(format!(
            "a restarted Redis still has the key: {probe:?}"
        )));
    }

    // PostgreSQL comes back on its port as another postmaster.
    let postmaster = dir.join("postgres").join("postmaster.pid");
    let old_pg = pid_from(&postmaster)?;
    infra.restart_postgres_immediate()?;
    let new_pg = pid_from(&postmaster)?;
    assert_ne!(old_pg, new_pg, "PostgreSQL was not restarted");
    assert_up(&infra, pg_port, redis_port)?;
    cleanup.infras.push(infra);
    Ok(())
}
