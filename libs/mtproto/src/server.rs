//! The TCP server: one task per connection that tells the transport, runs auth key creation
//! on unencrypted messages, and drives a [`Session`] on encrypted ones. A connection that sends
//! a bad frame or an undecryptable message is closed; no other connection notices. A call's
//! answer goes to whichever connection its session is on when it is ready (see
//! [`crate::parked`]), so a call outlives the connection it came on.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::debug;

use crate::crypto::Direction;
use crate::envelope::{Message, Plain, auth_key_id};
use crate::handshake::{ServerHandshake, Step};
use crate::parked::{Answer, AnswerSender, Parked};
use crate::session::{Backend, Outgoing, Session, UNKNOWN_KEY_CODE, rpc_error, rpc_result};
use crate::transport::{Detected, FrameError, Framing};

/// A connection that says nothing for this long is closed.
const IDLE: Duration = Duration::from_secs(15 * 60);

/// Numbers the connections (from 1) for [`crate::session::Call::connection_id`].
static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame: {0}")]
    Frame(#[from] FrameError),
    #[error("{0}")]
    Protocol(String),
}

/// Accepts connections until the listener fails; each runs in its own task.
pub async fn serve<B: Backend>(listener: TcpListener, backend: Arc<B>) -> std::io::Result<()> {
    serve_with(listener, backend, Arc::new(Parked::default())).await
}

/// [`serve`] with the sessions kept in `parked` (tests look into it).
pub async fn serve_with<B: Backend>(
    listener: TcpListener,
    backend: Arc<B>,
    parked: Arc<Parked>,
) -> std::io::Result<()> {
    loop {
        let (stream, peer) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let (backend, parked) = (backend.clone(), parked.clone());
        tokio::spawn(async move {
            if let Err(error) = connection(stream, backend, parked).await {
                debug!(%peer, %error, "mtproto connection closed");
            }
        });
    }
}

fn unix_now() -> i32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i32)
        .unwrap_or(0)
}

/// One client connection, start to end; its sessions live in `parked`, where they go on after
/// it ends.
pub async fn connection<B: Backend>(
    stream: TcpStream,
    backend: Arc<B>,
    parked: Arc<Parked>,
) -> Result<(), ConnectionError> {
    let (answers, mut answered) = mpsc::unbounded_channel::<Answer>();
    let mut session: Option<Session> = None;
    let result = run(
        stream,
        &backend,
        &parked,
        answers,
        &mut answered,
        &mut session,
    )
    .await;
    // The session lets go of this connection first, so that an answer finished from now on
    // waits for the session's next connection; then the answers already queued here follow
    // it there.
    drop(session);
    answered.close();
    while let Ok(answer) = answered.try_recv() {
        parked.deliver(answer);
    }
    result
}

async fn run<B: Backend>(
    mut stream: TcpStream,
    backend: &Arc<B>,
    parked: &Arc<Parked>,
    answers: AnswerSender,
    answered: &mut mpsc::UnboundedReceiver<Answer>,
    session: &mut Option<Session>,
) -> Result<(), ConnectionError> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut framing = loop {
        let n = tokio::time::timeout(IDLE, stream.read(&mut chunk))
            .await
            .map_err(|_| ConnectionError::Protocol("idle".into()))??;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Detected::Framing(framing, header) = Framing::detect(&buf)? {
            buf.drain(..header);
            break framing;
        }
    };
    let connection_id = NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed);
    let (push, mut outgoing) = mpsc::unbounded_channel::<Outgoing>();
    let mut handshake = ServerHandshake::new();
    let new_session = |key, salt, expires_at| {
        Session::new(key, salt, push.clone())
            .expiring_at(expires_at)
            .on_connection(connection_id)
            .with_parking(parked.clone())
            .answering_to(answers.clone())
    };
    let mut out = Vec::new();
    let mut plain_msg_id = 0i64;
    let mut idle_until = Instant::now() + IDLE;
    // Set by ping_delay_disconnect: only the next such ping moves it, other traffic does not
    // (a client uses it to have a dead connection closed even while it keeps acknowledging).
    let mut pinged_until: Option<Instant> = None;
    let mut close_after_write = false;
    let mut fresh_bytes = true;
    loop {
        // Bytes that arrived with the transport header are framed before reading more.
        if fresh_bytes {
            fresh_bytes = false;
            while let Some(frame) = framing.decode(&mut buf)? {
                let Some(key_id) = auth_key_id(&frame) else {
                    return Err(ConnectionError::Protocol(
                        "frame shorter than a key id".into(),
                    ));
                };
                if key_id == 0 {
                    let plain = Plain::decode(&frame)
                        .map_err(|e| ConnectionError::Protocol(e.to_string()))?;
                    let step = handshake
                        .handle(backend.server_key(), &plain.body, unix_now())
                        .map_err(|e| ConnectionError::Protocol(e.to_string()))?;
                    let reply = match step {
                        Step::Reply(reply) => reply,
                        Step::Done(reply, new_key) => {
                            backend
                                .save_key(&new_key)
                                .await
                                .map_err(ConnectionError::Protocol)?;
                            let expires_at = new_key.expires_at;
                            *session =
                                Some(new_session(new_key.key, Some(new_key.salt), expires_at));
                            reply
                        }
                    };
                    plain_msg_id = next_plain_msg_id(plain_msg_id);
                    framing.encode(
                        &Plain {
                            msg_id: plain_msg_id,
                            body: reply,
                        }
                        .encode(),
                        &mut out,
                    );
                    continue;
                }
                let now = i64::from(unix_now());
                if session.as_ref().map(|s| s.key().id()) != Some(key_id) {
                    // An expired temporary key is unknown, whatever the backend kept of it.
                    match backend.find_key(key_id).await.filter(|k| !k.expired(now)) {
                        Some(stored) => {
                            *session = Some(new_session(stored.key, None, stored.expires_at))
                        }
                        None => {
                            framing.encode(&UNKNOWN_KEY_CODE.to_le_bytes(), &mut out);
                            close_after_write = true;
                            break;
                        }
                    }
                }
                let Some(current) = session.as_mut() else {
                    continue;
                };
                // A temporary key that expired while its connection was open ends there too.
                if current.expired(now) {
                    framing.encode(&UNKNOWN_KEY_CODE.to_le_bytes(), &mut out);
                    close_after_write = true;
                    break;
                }
                let message = Message::decrypt(current.key(), Direction::ClientToServer, &frame)
                    .map_err(|e| ConnectionError::Protocol(e.to_string()))?;
                let actions = current.receive(message);
                for reply in &actions.send {
                    let sealed = current.seal(reply);
                    framing.encode(&sealed, &mut out);
                }
                if let Some(delay) = actions.disconnect_after {
                    pinged_until = Some(
                        Instant::now()
                            + Duration::from_secs(u64::try_from(delay.max(1)).unwrap_or(1)),
                    );
                }
                let mut key_ended = false;
                for (msg_id, perm_id) in actions.binds {
                    let perm = backend.find_key(perm_id).await;
                    let answer = match current.check_bind(msg_id, perm.as_ref()) {
                        Ok((perm_id, expires_at)) => {
                            let bound = backend
                                .bind_temp_key(current.key().id(), perm_id, expires_at)
                                .await;
                            if bound.is_ok() {
                                current.bound_until(expires_at);
                            }
                            bound
                        }
                        Err(error) => Err(error),
                    };
                    let reply = match answer {
                        Ok(()) => rpc_result(msg_id, &oxigram_tl::Serializable::to_bytes(&true)),
                        Err(error) if error.is_unknown_key() => {
                            key_ended = true;
                            break;
                        }
                        Err(error) => rpc_error(msg_id, &error),
                    };
                    framing.encode(&current.seal(&reply), &mut out);
                }
                // The backend ended the temporary key since the connection found it (another
                // key bound to its permanent key): unknown from here on, its calls not run.
                if key_ended {
                    framing.encode(&UNKNOWN_KEY_CODE.to_le_bytes(), &mut out);
                    close_after_write = true;
                    break;
                }
                for (msg_id, call, query) in actions.calls {
                    let backend = backend.clone();
                    let route = current.answer_route();
                    tokio::spawn(async move {
                        // Counts as returned once its answer is on its way (or it ended
                        // otherwise), so a call made to run after it is answered after it.
                        let _returning = route.returning(msg_id);
                        route.after(&call.after).await;
                        let (auth_key_id, session_id) = (call.auth_key_id, call.session_id);
                        let (reply, unknown_key) = match backend.call(call, query).await {
                            Ok(answer) => (rpc_result(msg_id, &answer), false),
                            Err(error) => (rpc_error(msg_id, &error), error.is_unknown_key()),
                        };
                        route.deliver(Answer {
                            auth_key_id,
                            session_id,
                            body: reply.body,
                            unknown_key,
                        });
                    });
                }
            }
        }
        if !out.is_empty() {
            stream.write_all(&out).await?;
            out.clear();
        }
        if close_after_write {
            return Ok(());
        }
        tokio::select! {
            read = stream.read(&mut chunk) => {
                let n = read?;
                if n == 0 {
                    return Ok(());
                }
                idle_until = Instant::now() + IDLE;
                buf.extend_from_slice(&chunk[..n]);
                fresh_bytes = true;
            }
            Some(answer) = answered.recv() => {
                // Whatever else is ready goes in the same write; an answer of a session this
                // connection no longer serves goes where that session is now.
                let mut next = Some(answer);
                while let Some(answer) = next {
                    match session.as_mut() {
                        Some(current) if current.serves(answer.auth_key_id, answer.session_id) => {
                            // The backend no longer knows the key: the connection ends as it
                            // does for any unknown key, and the answers left go to the session
                            // (which its next connection, refused too, never gets).
                            if answer.unknown_key {
                                framing.encode(&UNKNOWN_KEY_CODE.to_le_bytes(), &mut out);
                                close_after_write = true;
                                break;
                            }
                            let reply = Outgoing { body: answer.body, content_related: true };
                            framing.encode(&current.seal(&reply), &mut out);
                        }
                        _ => parked.deliver(answer),
                    }
                    next = answered.try_recv().ok();
                }
            }
            Some(next) = outgoing.recv() => {
                if let Some(current) = session.as_mut() {
                    let sealed = current.seal(&next);
                    framing.encode(&sealed, &mut out);
                    // Whatever else is queued goes in the same write.
                    while let Ok(more) = outgoing.try_recv() {
                        let sealed = current.seal(&more);
                        framing.encode(&sealed, &mut out);
                    }
                }
            }
            () = tokio::time::sleep_until(pinged_until.map_or(idle_until, |p| p.min(idle_until))) => {
                return Ok(());
            }
        }
    }
}

/// Unencrypted server msg_ids: unix time in the high half, ≡ 1 (mod 4), increasing.
fn next_plain_msg_id(last: i64) -> i64 {
    let candidate = (i64::from(unix_now()) << 32) | 1;
    if candidate > last {
        candidate
    } else {
        last + 4
    }
}
