//! The server loop against the crate's own client, over a real TCP socket, with a backend that
//! keeps keys and bindings in memory and answers a few functions. The suites: this file (keys,
//! transports, calls), `bind` (temporary keys), `bad_msg` (message checks on a live session)
//! and `reconnect` (answers across a broken connection).

mod bad_msg;
mod bind;
mod reconnect;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use oxigram_mtproto::client::{Client, ClientError, Options};
use oxigram_mtproto::handshake::NewKey;
use oxigram_mtproto::parked::Parked;
use oxigram_mtproto::session::{Backend, Call, Outgoing, RpcError, StoredKey};
use oxigram_mtproto::transport::Kind;
use oxigram_mtproto::{AuthKey, ServerKey};
use oxigram_tl::{Identifiable, Serializable, enums, functions, types};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Memory {
    key: ServerKey,
    /// Every key made, expired ones too (the server must refuse those itself).
    keys: Mutex<HashMap<i64, StoredKey>>,
    /// Temporary key → the permanent key it acts for.
    binds: Mutex<HashMap<i64, i64>>,
    /// Keys the backend no longer knows (see `forget`), although they are still in `keys`.
    forgotten: Mutex<HashSet<i64>>,
    /// `help.getInviteText` is slow: each call waits for a permit, and is counted.
    gate: tokio::sync::Semaphore,
    slow_calls: AtomicUsize,
}

impl Memory {
    fn binds(&self) -> HashMap<i64, i64> {
        self.binds.lock().map(|b| b.clone()).unwrap_or_default()
    }

    /// From now on the backend does not know the key, as a store that ended it would not.
    fn forget(&self, auth_key_id: i64) {
        if let Ok(mut forgotten) = self.forgotten.lock() {
            forgotten.insert(auth_key_id);
        }
    }

    fn knows(&self, auth_key_id: i64) -> bool {
        self.forgotten
            .lock()
            .is_ok_and(|forgotten| !forgotten.contains(&auth_key_id))
    }

    /// The key a call over `auth_key_id` acts as.
    fn acting(&self, auth_key_id: i64) -> i64 {
        self.binds()
            .get(&auth_key_id)
            .copied()
            .unwrap_or(auth_key_id)
    }
}

impl Backend for Memory {
    fn server_key(&self) -> &ServerKey {
        &self.key
    }

    async fn find_key(&self, auth_key_id: i64) -> Option<StoredKey> {
        if !self.knows(auth_key_id) {
            return None;
        }
        self.keys.lock().ok()?.get(&auth_key_id).cloned()
    }

    async fn save_key(&self, key: &NewKey) -> Result<(), String> {
        self.keys.lock().map_err(|e| e.to_string())?.insert(
            key.key.id(),
            StoredKey {
                key: key.key.clone(),
                expires_at: key.expires_at,
            },
        );
        Ok(())
    }

    async fn bind_temp_key(&self, temp: i64, perm: i64, expires_at: i32) -> Result<(), RpcError> {
        fn internal<T>(_: T) -> RpcError {
            RpcError::new(500, "INTERNAL")
        }
        if !self.knows(temp) {
            return Err(RpcError::unknown_key());
        }
        let mut binds = self.binds.lock().map_err(internal)?;
        if binds.get(&temp).is_some_and(|bound| *bound != perm) {
            return Err(RpcError::new(400, "TEMP_AUTH_KEY_ALREADY_BOUND"));
        }
        // One temporary key per permanent key: a new binding replaces the previous one.
        binds.retain(|_, bound| *bound != perm);
        binds.insert(temp, perm);
        if let Some(stored) = self.keys.lock().map_err(internal)?.get_mut(&temp) {
            let until = i64::from(expires_at);
            stored.expires_at = Some(stored.expires_at.map_or(until, |at| at.min(until)));
        }
        Ok(())
    }

    async fn call(&self, call: Call, query: Vec<u8>) -> Result<Vec<u8>, RpcError> {
        if !self.knows(call.auth_key_id) {
            return Err(RpcError::unknown_key());
        }
        match oxigram_tl::constructor_id(&query) {
            Some(functions::help::GetInviteText::CONSTRUCTOR_ID) => {
                self.slow_calls.fetch_add(1, Ordering::SeqCst);
                // One permit lets one call finish.
                if let Ok(permit) = self.gate.acquire().await {
                    permit.forget();
                }
                Ok(enums::help::InviteText::Text(types::help::InviteText {
                    message: "slow".into(),
                })
                .to_bytes())
            }
            // Who the caller is: the key its calls act as, in decimal.
            Some(functions::help::GetSupportName::CONSTRUCTOR_ID) => {
                Ok(enums::help::SupportName::Name(types::help::SupportName {
                    name: self.acting(call.auth_key_id).to_string(),
                })
                .to_bytes())
            }
            Some(functions::help::GetNearestDc::CONSTRUCTOR_ID) => {
                // A push before the answer, as live updates would arrive.
                let _ = call.push.send(Outgoing {
                    body: enums::Updates::TooLong.to_bytes(),
                    content_related: true,
                });
                Ok(enums::NearestDc::Dc(types::NearestDc {
                    country: call.layer.map(|l| l.to_string()).unwrap_or_default(),
                    this_dc: 1,
                    nearest_dc: 1,
                })
                .to_bytes())
            }
            _ => Err(RpcError::new(400, "METHOD_INVALID")),
        }
    }
}

async fn start() -> (String, Arc<Memory>) {
    start_with(Arc::new(Parked::default())).await
}

/// A server whose sessions live in `parked`.
async fn start_with(parked: Arc<Parked>) -> (String, Arc<Memory>) {
    let backend = Arc::new(Memory {
        key: ServerKey::generate().unwrap_or_else(|e| panic!("{e}")),
        keys: Mutex::default(),
        binds: Mutex::default(),
        forgotten: Mutex::default(),
        gate: tokio::sync::Semaphore::new(0),
        slow_calls: AtomicUsize::new(0),
    });
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .to_string();
    tokio::spawn(oxigram_mtproto::server::serve_with(
        listener,
        backend.clone(),
        parked,
    ));
    (addr, backend)
}

#[tokio::test]
async fn every_transport_creates_a_key_and_round_trips_calls() -> Result<(), ClientError> {
    let (addr, backend) = start().await;
    for (kind, obfuscated, rsa_pad) in [
        (Kind::Full, false, false),
        (Kind::Abridged, false, true),
        (Kind::Intermediate, false, false),
        (Kind::PaddedIntermediate, false, false),
        (Kind::Abridged, true, false),
        (Kind::Intermediate, true, true),
        (Kind::PaddedIntermediate, true, false),
    ] {
        let options = Options {
            kind,
            obfuscated,
            rsa_pad,
        };
        let mut client = Client::connect(&addr, backend.key.public(), options).await?;
        let enums::NearestDc::Dc(nearest) =
            client.invoke(&functions::help::GetNearestDc {}).await?;
        assert_eq!(nearest.country, oxigram_tl::LAYER.to_string(), "{kind:?}");
        // The push sent during the call is kept for the caller.
        let push = client.next_push().await?;
        assert_eq!(push, enums::Updates::TooLong.to_bytes());
        // An unknown method is an rpc_error on a connection that stays usable.
        let unknown = client
            .invoke(&functions::help::GetAppConfig { hash: 0 })
            .await;
        assert!(
            matches!(unknown, Err(ClientError::Rpc(ref e)) if e.code == 400 && e.message == "METHOD_INVALID")
        );
        let pong = client
            .invoke_raw(functions::Ping { ping_id: 99 }.to_bytes())
            .await?;
        assert_eq!(
            oxigram_tl::constructor_id(&pong),
            Some(types::Pong::CONSTRUCTOR_ID)
        );

        // The key outlives the connection: a reconnect gets bad_server_salt, then works.
        let key = client.auth_key().clone();
        drop(client);
        let mut again = Client::reconnect(&addr, key, options).await?;
        let enums::NearestDc::Dc(nearest) = again.invoke(&functions::help::GetNearestDc {}).await?;
        assert_eq!(nearest.this_dc, 1);
    }
    Ok(())
}

#[tokio::test]
async fn an_unknown_key_gets_404_and_a_bad_frame_closes_only_its_connection()
-> Result<(), ClientError> {
    let (addr, backend) = start().await;
    let stranger = AuthKey::from_bytes([7; 256]);
    let mut lost = Client::reconnect(&addr, stranger, Options::default()).await?;
    let answer = lost.invoke(&functions::help::GetNearestDc {}).await;
    assert!(
        matches!(answer, Err(ClientError::Transport(-404))),
        "{answer:?}"
    );

    let mut good = Client::connect(&addr, backend.key.public(), Options::default()).await?;
    let mut bad = TcpStream::connect(&addr).await?;
    // An intermediate frame that claims to be 1 GiB long.
    bad.write_all(&[0xee, 0xee, 0xee, 0xee, 0, 0, 0, 0x40])
        .await?;
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        bad.read_to_end(&mut rest),
    )
    .await;
    assert!(
        matches!(closed, Ok(Ok(0))),
        "the bad connection must be closed"
    );
    let enums::NearestDc::Dc(nearest) = good.invoke(&functions::help::GetNearestDc {}).await?;
    assert_eq!(nearest.this_dc, 1);
    Ok(())
}

#[tokio::test]
async fn a_key_the_backend_no_longer_knows_gets_404_on_its_open_connection()
-> Result<(), ClientError> {
    let parked = Arc::new(Parked::default());
    let (addr, backend) = start_with(parked.clone()).await;
    let mut gone = Client::connect(&addr, backend.key.public(), Options::default()).await?;
    let mut kept = Client::connect(&addr, backend.key.public(), Options::default()).await?;
    let (key, session_id) = (gone.auth_key().clone(), gone.session_id());
    for client in [&mut gone, &mut kept] {
        let enums::help::SupportName::Name(name) =
            client.invoke(&functions::help::GetSupportName {}).await?;
        assert_eq!(name.name, client.auth_key().id().to_string());
    }

    let pending = parked.pending(key.id(), session_id);
    assert!(pending.is_some());

    // The backend ends the key while its connection is open: the next call is the transport's
    // -404, as on a new connection, not an rpc_error the client would take for the call's.
    backend.forget(key.id());
    let open = gone.invoke(&functions::help::GetSupportName {}).await;
    assert!(
        matches!(open, Err(ClientError::Transport(-404))),
        "{open:?}"
    );
    let mut again = Client::reconnect(&addr, key.clone(), Options::default()).await?;
    let fresh = again.invoke(&functions::help::GetSupportName {}).await;
    assert!(
        matches!(fresh, Err(ClientError::Transport(-404))),
        "{fresh:?}"
    );
    // The refused call's answer is not kept for a connection that cannot come.
    for _ in 0..500 {
        if parked.connections(key.id(), session_id) == Some(0) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(parked.connections(key.id(), session_id), Some(0));
    assert_eq!(parked.pending(key.id(), session_id), pending);
    // Another key's connection goes on.
    let enums::help::SupportName::Name(name) =
        kept.invoke(&functions::help::GetSupportName {}).await?;
    assert_eq!(name.name, kept.auth_key().id().to_string());
    Ok(())
}

/// The requests the answers among the next messages are to, in the order they came, until the
/// pong to `ping_msg_id`.
async fn answered_until_pong(
    client: &mut Client,
    ping_msg_id: i64,
) -> Result<Vec<i64>, ClientError> {
    use oxigram_tl::{Cursor, Deserializable};
    let mut answered = Vec::new();
    loop {
        let message = client.receive_message().await?;
        let body = &message.body;
        match oxigram_tl::constructor_id(body) {
            Some(oxigram_mtproto::wire::RPC_RESULT) => {
                if let Some((req, _)) = oxigram_mtproto::wire::parse_rpc_result(&body[4..]) {
                    answered.push(req);
                }
            }
            Some(types::Pong::CONSTRUCTOR_ID) => {
                let pong = types::Pong::deserialize(&mut Cursor::from_slice(&body[4..]));
                if pong.is_ok_and(|pong| pong.msg_id == ping_msg_id) {
                    return Ok(answered);
                }
            }
            _ => {}
        }
    }
}

#[tokio::test]
async fn invoke_after_msg_runs_a_call_once_the_one_it_names_returned() -> Result<(), ClientError> {
    let (addr, backend) = start().await;
    let mut client = Client::connect(&addr, backend.key.public(), Options::default()).await?;
    let enums::NearestDc::Dc(nearest) = client.invoke(&functions::help::GetNearestDc {}).await?;
    assert_eq!(nearest.this_dc, 1);

    // A slow call, one chained after it, one chained after a message never sent, and one
    // naming itself (it would wait for ever).
    let slow = client
        .send(functions::help::GetInviteText {}.to_bytes(), true)
        .await?;
    let chained = client
        .send(
            functions::InvokeAfterMsg {
                msg_id: slow,
                query: functions::help::GetSupportName {},
            }
            .to_bytes(),
            true,
        )
        .await?;
    let unknown = client
        .send(
            functions::InvokeAfterMsgs {
                msg_ids: vec![slow - 4, chained - 4],
                query: functions::help::GetSupportName {},
            }
            .to_bytes(),
            true,
        )
        .await?;
    let (own_id, own_seq_no) = (client.next_msg_id(), client.next_seq_no(true));
    let own = functions::InvokeAfterMsg {
        msg_id: own_id,
        query: functions::help::GetSupportName {},
    };
    client
        .send_message(own_id, own_seq_no, own.to_bytes())
        .await?;

    // While the slow call runs, only the chained call waits.
    let ping = client
        .send(functions::Ping { ping_id: 1 }.to_bytes(), true)
        .await?;
    let mut answered = answered_until_pong(&mut client, ping).await?;
    for _ in 0..100 {
        if answered.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        let ping = client
            .send(functions::Ping { ping_id: 2 }.to_bytes(), true)
            .await?;
        answered.extend(answered_until_pong(&mut client, ping).await?);
    }
    answered.sort_unstable();
    assert_eq!(answered, [unknown, own_id]);
    assert_eq!(backend.slow_calls.load(Ordering::SeqCst), 1);

    // Once it returns, the chained call runs, and its answer comes after the slow one's.
    backend.gate.add_permits(1);
    let mut answered = Vec::new();
    for _ in 0..100 {
        let ping = client
            .send(functions::Ping { ping_id: 3 }.to_bytes(), true)
            .await?;
        answered.extend(answered_until_pong(&mut client, ping).await?);
        if answered.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(answered, [slow, chained]);
    Ok(())
}
