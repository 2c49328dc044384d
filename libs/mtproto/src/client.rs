//! A small MTProto client: creates an auth key (permanent or temporary), binds a temporary key
//! to a permanent one, then sends API calls one at a time and keeps whatever else the server
//! pushes. Tests and benchmarks use it; it speaks every transport, and tests can send messages
//! exactly as they choose.

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use oxigram_tl::{
    Cursor, Deserializable, Identifiable, RemoteCall, Serializable, functions, types,
};
use rand::RngCore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::bind;
use crate::crypto::{AuthKey, Direction};
use crate::envelope::{Message, Plain};
use crate::handshake::{ClientHandshake, HandshakeError};
use crate::rsa_key::ClientKey;
use crate::session::RpcError;
use crate::transport::{FrameError, Framing, Kind};
use crate::wire::{self, Tail};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame: {0}")]
    Frame(#[from] FrameError),
    #[error("handshake: {0}")]
    Handshake(#[from] HandshakeError),
    #[error("transport error {0}")]
    Transport(i32),
    #[error("rpc error {} {}", .0.code, .0.message)]
    Rpc(RpcError),
    #[error("bad message notification code {0}")]
    BadMsg(i32),
    #[error("unreadable answer: {0}")]
    Decode(String),
    #[error("connection closed")]
    Closed,
}

/// How to connect.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub kind: Kind,
    pub obfuscated: bool,
    /// RSA_PAD instead of the legacy RSA encryption.
    pub rsa_pad: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            kind: Kind::Full,
            obfuscated: false,
            rsa_pad: false,
        }
    }
}

/// One connection and one session.
pub struct Client {
    stream: TcpStream,
    framing: Framing,
    buf: Vec<u8>,
    key: AuthKey,
    salt: i64,
    session_id: i64,
    sent_content: i32,
    last_msg_id: i64,
    layer_sent: bool,
    /// Content messages other than answers (updates), oldest first.
    pushes: VecDeque<Vec<u8>>,
}

impl Client {
    /// Connects and creates a new auth key.
    pub async fn connect(
        addr: &str,
        server: ClientKey,
        options: Options,
    ) -> Result<Client, ClientError> {
        Self::create(addr, server, options, None).await
    }

    /// Connects and creates a temporary auth key that expires in `expires_in` seconds (what
    /// [`Client::bind_temp_key`] then binds to a permanent key).
    pub async fn connect_temporary(
        addr: &str,
        server: ClientKey,
        options: Options,
        expires_in: i32,
    ) -> Result<Client, ClientError> {
        Self::create(addr, server, options, Some(expires_in)).await
    }

    async fn create(
        addr: &str,
        server: ClientKey,
        options: Options,
        temp_expires_in: Option<i32>,
    ) -> Result<Client, ClientError> {
        let (mut stream, mut framing, mut buf) = open(addr, options).await?;
        let mut handshake = ClientHandshake::new(server, options.rsa_pad, temp_expires_in);
        let mut last = 0i64;
        let res_pq = plain_call(
            &mut stream,
            &mut framing,
            &mut buf,
            &mut last,
            handshake.req_pq(),
        )
        .await?;
        let req_dh = handshake.req_dh_params(&res_pq)?;
        let server_dh = plain_call(&mut stream, &mut framing, &mut buf, &mut last, req_dh).await?;
        let (set_dh, key) = handshake.set_client_dh_params(&server_dh)?;
        let dh_gen = plain_call(&mut stream, &mut framing, &mut buf, &mut last, set_dh).await?;
        let salt = handshake.finish(&dh_gen, &key)?;
        Ok(Self::with_stream(stream, framing, buf, key, salt))
    }

    /// Connects again in the same session (same key and session id, seq_no and msg_ids going
    /// on), as a client does when its connection broke.
    pub async fn resume(
        addr: &str,
        resumption: Resumption,
        options: Options,
    ) -> Result<Client, ClientError> {
        let (stream, framing, buf) = open(addr, options).await?;
        let mut client = Self::with_stream(stream, framing, buf, resumption.key, resumption.salt);
        client.session_id = resumption.session_id;
        client.sent_content = resumption.sent_content;
        client.last_msg_id = resumption.last_msg_id;
        client.layer_sent = true;
        Ok(client)
    }

    /// What [`Client::resume`] needs to go on with this session on a new connection.
    pub fn resumption(&self) -> Resumption {
        Resumption {
            key: self.key.clone(),
            salt: self.salt,
            session_id: self.session_id,
            sent_content: self.sent_content,
            last_msg_id: self.last_msg_id,
        }
    }

    /// Connects with a key made before (a reconnect).
    pub async fn reconnect(
        addr: &str,
        key: AuthKey,
        options: Options,
    ) -> Result<Client, ClientError> {
        let (stream, framing, buf) = open(addr, options).await?;
        Ok(Self::with_stream(stream, framing, buf, key, 0))
    }

    fn with_stream(
        stream: TcpStream,
        framing: Framing,
        buf: Vec<u8>,
        key: AuthKey,
        salt: i64,
    ) -> Client {
        let mut session_id = [0u8; 8];
        rand::rng().fill_bytes(&mut session_id);
        Client {
            stream,
            framing,
            buf,
            key,
            salt,
            session_id: i64::from_le_bytes(session_id),
            sent_content: 0,
            last_msg_id: 0,
            layer_sent: false,
            pushes: VecDeque::new(),
        }
    }

    pub fn auth_key(&self) -> &AuthKey {
        &self.key
    }

    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    /// `auth.bindTempAuthKey`: this connection's (temporary) key acts for `perm` until
    /// `expires_at`, as the protocol builds the call.
    pub async fn bind_temp_key(
        &mut self,
        perm: &AuthKey,
        expires_at: i32,
    ) -> Result<bool, ClientError> {
        self.bind_temp_key_with(perm, expires_at, |_| {}).await
    }

    /// [`Client::bind_temp_key`] with the call's parts changed by `change` before the binding
    /// message is encrypted (tests make bad ones this way).
    pub async fn bind_temp_key_with(
        &mut self,
        perm: &AuthKey,
        expires_at: i32,
        change: impl Fn(&mut BindDraft),
    ) -> Result<bool, ClientError> {
        loop {
            let msg_id = self.next_msg_id();
            let mut nonce = [0u8; 8];
            rand::rng().fill_bytes(&mut nonce);
            let nonce = i64::from_le_bytes(nonce);
            let mut draft = BindDraft {
                perm_auth_key_id: perm.id(),
                nonce,
                expires_at,
                inner: types::BindAuthKeyInner {
                    nonce,
                    temp_auth_key_id: self.key.id(),
                    perm_auth_key_id: perm.id(),
                    temp_session_id: self.session_id,
                    expires_at,
                },
                inner_msg_id: msg_id,
                inner_seq_no: 0,
                encrypt_with: perm.clone(),
                encrypted_message: None,
            };
            change(&mut draft);
            let encrypted_message = draft.encrypted_message.clone().unwrap_or_else(|| {
                bind::encrypt(
                    &draft.encrypt_with,
                    draft.inner_msg_id,
                    draft.inner_seq_no,
                    &draft.inner,
                )
            });
            let body = functions::auth::BindTempAuthKey {
                perm_auth_key_id: draft.perm_auth_key_id,
                nonce: draft.nonce,
                expires_at: draft.expires_at,
                encrypted_message,
            }
            .to_bytes();
            let seq_no = self.next_seq_no(true);
            self.send_message(msg_id, seq_no, body).await?;
            // A bad salt asks for the call again, under a new msg_id (which the binding
            // message names, so it is built again).
            if let Answer::Result(result) = self.answer_to(msg_id).await? {
                return bool::deserialize(&mut Cursor::from_slice(&result))
                    .map_err(|e| ClientError::Decode(e.to_string()));
            }
        }
    }

    /// Calls a typed function and reads its typed answer.
    ///
    /// The exchange runs as a future on the heap, so what a caller awaits is a pointer: a long
    /// test awaiting many calls in one body would otherwise keep a slot of the whole exchange
    /// per call in its debug-build frame and outgrow a thread's stack.
    pub fn invoke<R: RemoteCall>(
        &mut self,
        request: &R,
    ) -> impl Future<Output = Result<R::Return, ClientError>> + Send + '_ {
        let exchange = Box::pin(self.invoke_raw(request.to_bytes()));
        async move {
            let answer = exchange.await?;
            R::Return::deserialize(&mut Cursor::from_slice(&answer))
                .map_err(|e| ClientError::Decode(e.to_string()))
        }
    }

    /// Calls a serialised function; the first call is wrapped in `invokeWithLayer` and
    /// `initConnection` as stock clients do.
    pub async fn invoke_raw(&mut self, query: Vec<u8>) -> Result<Vec<u8>, ClientError> {
        let body = if self.layer_sent {
            query
        } else {
            self.layer_sent = true;
            functions::InvokeWithLayer {
                layer: oxigram_tl::LAYER,
                query: functions::InitConnection {
                    api_id: 1,
                    device_model: "oxigram-mtproto-client".into(),
                    system_version: std::env::consts::OS.into(),
                    app_version: env!("CARGO_PKG_VERSION").into(),
                    system_lang_code: "en".into(),
                    lang_pack: String::new(),
                    lang_code: "en".into(),
                    proxy: None,
                    params: None,
                    query: Tail(query),
                },
            }
            .to_bytes()
        };
        loop {
            let msg_id = self.send(body.clone(), true).await?;
            match self.answer_to(msg_id).await? {
                Answer::Result(result) => return Ok(result),
                Answer::Resend => continue,
            }
        }
    }

    /// The next pushed update (waiting for one if none is queued).
    pub async fn next_push(&mut self) -> Result<Vec<u8>, ClientError> {
        loop {
            if let Some(push) = self.pushes.pop_front() {
                return Ok(push);
            }
            let message = self.receive().await?;
            self.keep(message.msg_id, message.body, None)?;
        }
    }

    /// Sends a message; returns its msg_id.
    pub async fn send(&mut self, body: Vec<u8>, content_related: bool) -> Result<i64, ClientError> {
        let seq_no = self.next_seq_no(content_related);
        let msg_id = self.next_msg_id();
        self.send_message(msg_id, seq_no, body).await?;
        Ok(msg_id)
    }

    /// The seq_no of the next message: odd and counted for a content-related one.
    pub fn next_seq_no(&mut self, content_related: bool) -> i32 {
        if content_related {
            self.sent_content += 1;
            self.sent_content * 2 - 1
        } else {
            self.sent_content * 2
        }
    }

    /// Sends one message exactly as given (tests use it to break the rules on purpose).
    pub async fn send_message(
        &mut self,
        msg_id: i64,
        seq_no: i32,
        body: Vec<u8>,
    ) -> Result<(), ClientError> {
        let frame = Message {
            salt: self.salt,
            session_id: self.session_id,
            msg_id,
            seq_no,
            body,
        }
        .encrypt(&self.key, Direction::ClientToServer);
        let mut out = Vec::new();
        self.framing.encode(&frame, &mut out);
        self.stream.write_all(&out).await?;
        Ok(())
    }

    /// The answer to message `msg_id` sent with [`Client::send_message`]: its `rpc_result`'s
    /// result, `pong` or `future_salts`; a `bad_msg_notification` about it is
    /// [`ClientError::BadMsg`] (a `bad_server_salt` too, with code 48, after the salt is
    /// taken).
    pub async fn answer(&mut self, msg_id: i64) -> Result<Vec<u8>, ClientError> {
        match self.answer_to(msg_id).await? {
            Answer::Result(result) => Ok(result),
            Answer::Resend => Err(ClientError::BadMsg(48)),
        }
    }

    /// The next message from the server as it came, nothing sorted or taken out of it.
    pub async fn receive_message(&mut self) -> Result<Message, ClientError> {
        self.receive().await
    }

    async fn answer_to(&mut self, msg_id: i64) -> Result<Answer, ClientError> {
        loop {
            let message = self.receive().await?;
            if let Some(answer) = self.keep(message.msg_id, message.body, Some(msg_id))? {
                return Ok(answer);
            }
        }
    }

    /// Sorts one server message: an answer to `waiting`, a salt correction, or a push.
    fn keep(
        &mut self,
        _server_msg_id: i64,
        body: Vec<u8>,
        waiting: Option<i64>,
    ) -> Result<Option<Answer>, ClientError> {
        let Some(id) = oxigram_tl::constructor_id(&body) else {
            return Err(ClientError::Decode("empty message".into()));
        };
        let rest = &body[4..];
        match id {
            wire::MSG_CONTAINER => {
                let mut found = None;
                for inner in
                    wire::parse_container(rest).map_err(|e| ClientError::Decode(e.to_string()))?
                {
                    if let Some(answer) = self.keep(inner.msg_id, inner.body, waiting)? {
                        found = Some(answer);
                    }
                }
                Ok(found)
            }
            wire::GZIP_PACKED => {
                let inner = wire::gunzip(rest).map_err(|e| ClientError::Decode(e.to_string()))?;
                self.keep(_server_msg_id, inner, waiting)
            }
            wire::RPC_RESULT => {
                let (req, result) = wire::parse_rpc_result(rest)
                    .ok_or_else(|| ClientError::Decode("rpc_result".into()))?;
                if Some(req) != waiting {
                    return Ok(None);
                }
                let result = if oxigram_tl::constructor_id(result) == Some(wire::GZIP_PACKED) {
                    wire::gunzip(&result[4..]).map_err(|e| ClientError::Decode(e.to_string()))?
                } else {
                    result.to_vec()
                };
                if oxigram_tl::constructor_id(&result) == Some(types::RpcError::CONSTRUCTOR_ID) {
                    let error = types::RpcError::deserialize(&mut Cursor::from_slice(&result[4..]))
                        .map_err(|e| ClientError::Decode(e.to_string()))?;
                    return Err(ClientError::Rpc(RpcError::new(
                        error.error_code,
                        error.error_message,
                    )));
                }
                Ok(Some(Answer::Result(result)))
            }
            types::BadServerSalt::CONSTRUCTOR_ID => {
                let bad = types::BadServerSalt::deserialize(&mut Cursor::from_slice(rest))
                    .map_err(|e| ClientError::Decode(e.to_string()))?;
                self.salt = bad.new_server_salt;
                Ok((Some(bad.bad_msg_id) == waiting).then_some(Answer::Resend))
            }
            types::BadMsgNotification::CONSTRUCTOR_ID => {
                let bad = types::BadMsgNotification::deserialize(&mut Cursor::from_slice(rest))
                    .map_err(|e| ClientError::Decode(e.to_string()))?;
                if Some(bad.bad_msg_id) == waiting {
                    return Err(ClientError::BadMsg(bad.error_code));
                }
                Ok(None)
            }
            types::NewSessionCreated::CONSTRUCTOR_ID => {
                if let Ok(created) =
                    types::NewSessionCreated::deserialize(&mut Cursor::from_slice(rest))
                {
                    self.salt = created.server_salt;
                }
                Ok(None)
            }
            types::Pong::CONSTRUCTOR_ID => {
                let pong = types::Pong::deserialize(&mut Cursor::from_slice(rest))
                    .map_err(|e| ClientError::Decode(e.to_string()))?;
                Ok((Some(pong.msg_id) == waiting).then(|| Answer::Result(body.clone())))
            }
            types::FutureSalts::CONSTRUCTOR_ID => {
                let salts = types::FutureSalts::deserialize(&mut Cursor::from_slice(rest))
                    .map_err(|e| ClientError::Decode(e.to_string()))?;
                Ok((Some(salts.req_msg_id) == waiting).then(|| Answer::Result(body.clone())))
            }
            types::MsgsAck::CONSTRUCTOR_ID | types::MsgsStateInfo::CONSTRUCTOR_ID => Ok(None),
            _ => {
                self.pushes.push_back(body);
                Ok(None)
            }
        }
    }

    async fn receive(&mut self) -> Result<Message, ClientError> {
        let frame = read_frame(&mut self.stream, &mut self.framing, &mut self.buf).await?;
        if frame.len() == 4 {
            return Err(ClientError::Transport(i32::from_le_bytes([
                frame[0], frame[1], frame[2], frame[3],
            ])));
        }
        Message::decrypt(&self.key, Direction::ServerToClient, &frame)
            .map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// A new msg_id: the time in the high half, above every earlier one.
    pub fn next_msg_id(&mut self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let candidate =
            ((now.as_secs() as i64) << 32) | ((i64::from(now.subsec_nanos()) << 2) & 0xffff_fffc);
        self.last_msg_id = if candidate > self.last_msg_id {
            candidate
        } else {
            self.last_msg_id + 4
        };
        self.last_msg_id
    }
}

enum Answer {
    Result(Vec<u8>),
    Resend,
}

/// A session's state a client keeps to go on with it over a new connection.
#[derive(Debug, Clone)]
pub struct Resumption {
    pub key: AuthKey,
    pub salt: i64,
    pub session_id: i64,
    pub sent_content: i32,
    pub last_msg_id: i64,
}

/// A bind call before it is sent: the call's own fields, the binding message, and the key and
/// envelope it is encrypted with.
#[derive(Debug, Clone)]
pub struct BindDraft {
    pub perm_auth_key_id: i64,
    pub nonce: i64,
    pub expires_at: i32,
    pub inner: types::BindAuthKeyInner,
    pub inner_msg_id: i64,
    pub inner_seq_no: i32,
    pub encrypt_with: AuthKey,
    /// Sent instead of the binding message the fields above make.
    pub encrypted_message: Option<Vec<u8>>,
}

async fn open(addr: &str, options: Options) -> Result<(TcpStream, Framing, Vec<u8>), ClientError> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (framing, prefix) = Framing::client(options.kind, options.obfuscated);
    stream.write_all(&prefix).await?;
    Ok((stream, framing, Vec::new()))
}

async fn read_frame(
    stream: &mut TcpStream,
    framing: &mut Framing,
    buf: &mut Vec<u8>,
) -> Result<Vec<u8>, ClientError> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(frame) = framing.decode(buf)? {
            return Ok(frame);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(ClientError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn plain_call(
    stream: &mut TcpStream,
    framing: &mut Framing,
    buf: &mut Vec<u8>,
    last_msg_id: &mut i64,
    body: Vec<u8>,
) -> Result<Vec<u8>, ClientError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let candidate = (now.as_secs() as i64) << 32;
    *last_msg_id = if candidate > *last_msg_id {
        candidate
    } else {
        *last_msg_id + 4
    };
    let mut out = Vec::new();
    framing.encode(
        &Plain {
            msg_id: *last_msg_id,
            body,
        }
        .encode(),
        &mut out,
    );
    stream.write_all(&out).await?;
    let frame = read_frame(stream, framing, buf).await?;
    if frame.len() == 4 {
        return Err(ClientError::Transport(i32::from_le_bytes([
            frame[0], frame[1], frame[2], frame[3],
        ])));
    }
    Ok(Plain::decode(&frame)
        .map_err(|e| ClientError::Decode(e.to_string()))?
        .body)
}
