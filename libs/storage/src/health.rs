//! Noticing that Postgres connections died, so that the pools test the connections that were
//! idle at that moment before handing them out.
//!
//! A pool pings only connections idle for [`PING_WHEN_IDLE_FOR`](crate::PING_WHEN_IDLE_FOR)
//! (a ping per transaction costs a round trip). When the server restarts, every idle
//! connection is dead, and without more each would fail the next request that gets it. So a
//! loss is recorded when it is seen:
//! - by any request whose statement failed because its connection or the server went away
//!   (the `From<sqlx::Error>` conversion of `oxigram-errors` calls [`note`], and so do paths
//!   that handle a `sqlx::Error` themselves), process-wide, since such an error does not say
//!   which pool it came from;
//! - by each pool's watch connection, which only waits for the server to close it, and so
//!   learns of a restart the moment it happens, before any request has tried.
//!
//! A connection idle since before the last loss is then pinged at acquire; a dead one is
//! dropped and replaced, and the request gets a live one. Connections used after the loss are
//! handed out as before, without a ping.

use std::{
    sync::{
        LazyLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

/// Instants are kept as nanoseconds since this one, to fit in an atomic.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// When a request of this process last saw a connection die (0: never).
static LAST_LOSS: AtomicU64 = AtomicU64::new(0);

/// SQLSTATEs of a server that is going away or not there yet: admin_shutdown (57P01, also
/// sent by `pg_ctl stop -m immediate`), crash_shutdown (57P02) and cannot_connect_now
/// (57P03, still recovering).
const SERVER_GONE: [&str; 3] = ["57P01", "57P02", "57P03"];

/// Whether `err` means the connection or the server went away: the statement's fate is
/// unknown to the caller and the connection is unusable, but a retry on a new connection may
/// well succeed.
pub fn is_connection_lost(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::WorkerCrashed => true,
        // What sqlx reports when the stream ended or was closed under it; other protocol
        // errors are bugs (ours included: some code reports impossible replies this way).
        sqlx::Error::Protocol(message) => {
            let message = message.to_ascii_lowercase();
            message.contains("closed") || message.contains("eof")
        }
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // Class 08: connection exception.
            code.starts_with("08") || SERVER_GONE.contains(&code.as_ref())
        }),
        _ => false,
    }
}

/// Records now as the last connection loss when `err` is one (see [`is_connection_lost`]);
/// returns whether it was.
pub fn note(err: &sqlx::Error) -> bool {
    let lost = is_connection_lost(err);
    if lost {
        record(&LAST_LOSS);
    }
    lost
}

fn now() -> u64 {
    // Never 0, which means "never".
    (EPOCH.elapsed().as_nanos() as u64).max(1)
}

pub(crate) fn record(at: &AtomicU64) {
    at.fetch_max(now(), Ordering::Relaxed);
}

/// Whether a connection idle for `idle_for` has been idle since before the last loss seen by
/// a request or by `watched` (its pool's watch connection).
pub(crate) fn idle_since_loss(idle_for: Duration, watched: &AtomicU64) -> bool {
    let last = LAST_LOSS
        .load(Ordering::Relaxed)
        .max(watched.load(Ordering::Relaxed));
    if last == 0 {
        return false;
    }
    let idle_since = now().saturating_sub(idle_for.as_nanos() as u64);
    idle_since <= last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_losses() {
        let io = sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "expected to read 5 bytes, got 0 bytes at EOF",
        ));
        assert!(is_connection_lost(&io));
        assert!(is_connection_lost(&sqlx::Error::Protocol(
            "connection closed".into()
        )));
        assert!(!is_connection_lost(&sqlx::Error::Protocol(
            "no send at position 3".into()
        )));
        assert!(!is_connection_lost(&sqlx::Error::RowNotFound));
        assert!(!is_connection_lost(&sqlx::Error::PoolTimedOut));
    }

    #[test]
    fn only_connections_idle_before_a_loss_are_suspect() {
        let watched = AtomicU64::new(0);
        // A connection idle for an hour predates any loss this process can have recorded.
        record(&watched);
        assert!(idle_since_loss(Duration::from_secs(3600), &watched));
        std::thread::sleep(Duration::from_millis(5));
        // One released a moment ago was used (and released with sqlx's ping) after it.
        assert!(!idle_since_loss(Duration::ZERO, &watched));
    }
}
