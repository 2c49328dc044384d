//! Auth key creation (Diffie–Hellman over unencrypted messages), both sides.
//!
//! The server side ([`ServerHandshake`]) answers `req_pq_multi`/`req_pq`, `req_DH_params`
//! (legacy RSA and RSA_PAD, plain, `_dc` and `_temp` inner data) and `set_client_DH_params`,
//! checking every nonce, hash and DH value as the protocol requires. The client side
//! ([`ClientHandshake`]) is what tests and benchmarks connect with.

use oxigram_tl::{Cursor, Deserializable, Identifiable, Serializable, functions, types};
use rand::{Rng, RngCore};
use rsa::BigUint;

use crate::crypto::{AuthKey, handshake_aes, ige_decrypt, ige_encrypt, sha1};
use crate::rsa_key::{ClientKey, Plaintext, ServerKey};

/// Telegram's 2048-bit safe prime; with g = 3 clients recognise it without their own checks.
const DH_PRIME_HEX: &str = "c71caeb9c6b1c9048e6c522f70f13f73980d40238e3e21c14934d037563d930f\
48198a0aa7c14058229493d22530f4dbfa336f6e0ac925139543aed44cce7c37\
20fd51f69458705ac68cd4fe6b6b13abdc9746512969328454f18faf8c595f64\
2477fe96bb2a941d5bcd1d4ac8cc49880708fa9b378e3c4f3a9060bee67cf9a4\
a4a695811051907e162753b56b0f6b410dba74d8a84b2a14b3144e0ef1284754\
fd17ed950d5965b4b9dd46582db1178d169c6bc465b0d6ff9ca3928fef5b9ae4\
e418fc15e83ebea0f87fa9ff5eed70050ded2849f47bf959d956850ce929851f\
0d8115f635b105ee2e4e15d04b2454bf6f4fadf034b10403119cd8e3b92fcc5b";
const G: i32 = 3;

fn dh_prime() -> BigUint {
    BigUint::parse_bytes(DH_PRIME_HEX.as_bytes(), 16).unwrap_or_default()
}

/// Why auth key creation failed; the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    #[error("unexpected message {0:#010x} at this step")]
    Unexpected(u32),
    #[error("malformed {0}")]
    Malformed(&'static str),
    #[error("nonce mismatch")]
    Nonce,
    #[error("p, q or pq mismatch")]
    Factors,
    #[error("unknown RSA key fingerprint")]
    Fingerprint,
    #[error("hash mismatch in {0}")]
    Hash(&'static str),
    #[error("DH value out of the safe range")]
    DhRange,
}

/// The result of a finished handshake.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub key: AuthKey,
    /// The first server salt: `new_nonce[0..8] XOR server_nonce[0..8]`.
    pub salt: i64,
    /// `Some(seconds)` when the client asked for a temporary key (PFS).
    pub expires_in: Option<i32>,
    /// When a temporary key expires (unix seconds: the server's time at creation plus
    /// `expires_in`); from then on it is an unknown key. `None` for a permanent key.
    pub expires_at: Option<i64>,
    /// The client's DC in `p_q_inner_data_dc`, if it sent one.
    pub dc: Option<i32>,
}

/// What the server sends back for one handshake message.
pub enum Step {
    Reply(Vec<u8>),
    Done(Vec<u8>, Box<NewKey>),
}

enum ServerState {
    Start,
    SentPq {
        nonce: [u8; 16],
        server_nonce: [u8; 16],
        p: u32,
        q: u32,
    },
    SentDh {
        nonce: [u8; 16],
        server_nonce: [u8; 16],
        new_nonce: [u8; 32],
        a: BigUint,
        expires_in: Option<i32>,
        dc: Option<i32>,
    },
}

/// One connection's server side of auth key creation.
pub struct ServerHandshake {
    state: ServerState,
}

impl Default for ServerHandshake {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerHandshake {
    pub fn new() -> ServerHandshake {
        ServerHandshake {
            state: ServerState::Start,
        }
    }

    /// Answers one unencrypted message body. `now` is the server's unix time.
    pub fn handle(
        &mut self,
        key: &ServerKey,
        body: &[u8],
        now: i32,
    ) -> Result<Step, HandshakeError> {
        let id = oxigram_tl::constructor_id(body).ok_or(HandshakeError::Malformed("message"))?;
        let mut cursor = Cursor::from_slice(&body[4..]);
        match (&self.state, id) {
            (_, functions::ReqPqMulti::CONSTRUCTOR_ID | functions::ReqPq::CONSTRUCTOR_ID) => {
                // Both carry just the nonce; a client may restart at any time.
                let nonce = <[u8; 16]>::deserialize(&mut cursor)
                    .map_err(|_| HandshakeError::Malformed("req_pq"))?;
                let mut rng = rand::rng();
                let mut server_nonce = [0u8; 16];
                rng.fill_bytes(&mut server_nonce);
                let (p, q) = random_factors(&mut rng);
                let pq = u64::from(p) * u64::from(q);
                let answer = types::ResPq {
                    nonce,
                    server_nonce,
                    pq: trimmed(&pq.to_be_bytes()),
                    server_public_key_fingerprints: vec![key.fingerprint()],
                };
                self.state = ServerState::SentPq {
                    nonce,
                    server_nonce,
                    p,
                    q,
                };
                Ok(Step::Reply(boxed(&answer)))
            }
            (
                &ServerState::SentPq {
                    nonce,
                    server_nonce,
                    p,
                    q,
                },
                functions::ReqDhParams::CONSTRUCTOR_ID,
            ) => {
                let request = functions::ReqDhParams::deserialize(&mut cursor)
                    .map_err(|_| HandshakeError::Malformed("req_DH_params"))?;
                if request.nonce != nonce || request.server_nonce != server_nonce {
                    return Err(HandshakeError::Nonce);
                }
                if request.p != trimmed(&p.to_be_bytes()) || request.q != trimmed(&q.to_be_bytes())
                {
                    return Err(HandshakeError::Factors);
                }
                if request.public_key_fingerprint != key.fingerprint() {
                    return Err(HandshakeError::Fingerprint);
                }
                let inner = decrypt_inner(key, &request.encrypted_data)?;
                let pq = trimmed(&(u64::from(p) * u64::from(q)).to_be_bytes());
                if inner.nonce != nonce || inner.server_nonce != server_nonce {
                    return Err(HandshakeError::Nonce);
                }
                if inner.pq != pq || inner.p != request.p || inner.q != request.q {
                    return Err(HandshakeError::Factors);
                }
                let prime = dh_prime();
                let (a, g_a) = dh_secret(&prime);
                let answer = types::ServerDhInnerData {
                    nonce,
                    server_nonce,
                    g: G,
                    dh_prime: prime.to_bytes_be(),
                    g_a: g_a.to_bytes_be(),
                    server_time: now,
                };
                let (aes_key, aes_iv) = handshake_aes(&server_nonce, &inner.new_nonce);
                let encrypted_answer = hashed_and_encrypted(&boxed(&answer), &aes_key, &aes_iv);
                self.state = ServerState::SentDh {
                    nonce,
                    server_nonce,
                    new_nonce: inner.new_nonce,
                    a,
                    expires_in: inner.expires_in,
                    dc: inner.dc,
                };
                Ok(Step::Reply(boxed(&types::ServerDhParamsOk {
                    nonce,
                    server_nonce,
                    encrypted_answer,
                })))
            }
            (
                ServerState::SentDh {
                    nonce,
                    server_nonce,
                    new_nonce,
                    a,
                    expires_in,
                    dc,
                },
                functions::SetClientDhParams::CONSTRUCTOR_ID,
            ) => {
                let request = functions::SetClientDhParams::deserialize(&mut cursor)
                    .map_err(|_| HandshakeError::Malformed("set_client_DH_params"))?;
                if &request.nonce != nonce || &request.server_nonce != server_nonce {
                    return Err(HandshakeError::Nonce);
                }
                let (aes_key, aes_iv) = handshake_aes(server_nonce, new_nonce);
                let plain = decrypted_and_checked(&request.encrypted_data, &aes_key, &aes_iv)?;
                let mut inner_cursor = Cursor::from_slice(&plain);
                let id = u32::deserialize(&mut inner_cursor)
                    .map_err(|_| HandshakeError::Malformed("client_DH_inner_data"))?;
                if id != types::ClientDhInnerData::CONSTRUCTOR_ID {
                    return Err(HandshakeError::Unexpected(id));
                }
                let inner = types::ClientDhInnerData::deserialize(&mut inner_cursor)
                    .map_err(|_| HandshakeError::Malformed("client_DH_inner_data"))?;
                if &inner.nonce != nonce || &inner.server_nonce != server_nonce {
                    return Err(HandshakeError::Nonce);
                }
                let prime = dh_prime();
                let g_b = BigUint::from_bytes_be(&inner.g_b);
                if !in_safe_range(&g_b, &prime) {
                    return Err(HandshakeError::DhRange);
                }
                let auth_key =
                    AuthKey::from_bytes(left_pad_256(&g_b.modpow(a, &prime).to_bytes_be()));
                let salt =
                    i64::from_le_bytes(std::array::from_fn(|i| new_nonce[i] ^ server_nonce[i]));
                let answer = types::DhGenOk {
                    nonce: *nonce,
                    server_nonce: *server_nonce,
                    new_nonce_hash1: auth_key.new_nonce_hash(new_nonce, 1),
                };
                let done = NewKey {
                    key: auth_key,
                    salt,
                    expires_in: *expires_in,
                    expires_at: expires_in.map(|s| i64::from(now) + i64::from(s)),
                    dc: *dc,
                };
                self.state = ServerState::Start;
                Ok(Step::Done(boxed(&answer), Box::new(done)))
            }
            (_, id) => Err(HandshakeError::Unexpected(id)),
        }
    }
}

/// `p_q_inner_data` in any of its four forms, as the server needs it.
struct Inner {
    pq: Vec<u8>,
    p: Vec<u8>,
    q: Vec<u8>,
    nonce: [u8; 16],
    server_nonce: [u8; 16],
    new_nonce: [u8; 32],
    expires_in: Option<i32>,
    dc: Option<i32>,
}

fn decrypt_inner(key: &ServerKey, encrypted: &[u8]) -> Result<Inner, HandshakeError> {
    let (data, legacy_hash) = match key
        .decrypt(encrypted)
        .map_err(|_| HandshakeError::Hash("RSA"))?
    {
        Plaintext::Padded(data) => (data, None),
        Plaintext::Legacy { sha1, data } => (data, Some(sha1)),
    };
    let mut cursor = Cursor::from_slice(&data);
    let malformed = |_| HandshakeError::Malformed("p_q_inner_data");
    let id = u32::deserialize(&mut cursor).map_err(malformed)?;
    let inner = match id {
        types::PQInnerData::CONSTRUCTOR_ID => {
            let d = types::PQInnerData::deserialize(&mut cursor).map_err(malformed)?;
            Inner {
                pq: d.pq,
                p: d.p,
                q: d.q,
                nonce: d.nonce,
                server_nonce: d.server_nonce,
                new_nonce: d.new_nonce,
                expires_in: None,
                dc: None,
            }
        }
        types::PQInnerDataDc::CONSTRUCTOR_ID => {
            let d = types::PQInnerDataDc::deserialize(&mut cursor).map_err(malformed)?;
            Inner {
                pq: d.pq,
                p: d.p,
                q: d.q,
                nonce: d.nonce,
                server_nonce: d.server_nonce,
                new_nonce: d.new_nonce,
                expires_in: None,
                dc: Some(d.dc),
            }
        }
        types::PQInnerDataTemp::CONSTRUCTOR_ID => {
            let d = types::PQInnerDataTemp::deserialize(&mut cursor).map_err(malformed)?;
            Inner {
                pq: d.pq,
                p: d.p,
                q: d.q,
                nonce: d.nonce,
                server_nonce: d.server_nonce,
                new_nonce: d.new_nonce,
                expires_in: Some(d.expires_in),
                dc: None,
            }
        }
        types::PQInnerDataTempDc::CONSTRUCTOR_ID => {
            let d = types::PQInnerDataTempDc::deserialize(&mut cursor).map_err(malformed)?;
            Inner {
                pq: d.pq,
                p: d.p,
                q: d.q,
                nonce: d.nonce,
                server_nonce: d.server_nonce,
                new_nonce: d.new_nonce,
                expires_in: Some(d.expires_in),
                dc: Some(d.dc),
            }
        }
        other => return Err(HandshakeError::Unexpected(other)),
    };
    if let Some(hash) = legacy_hash {
        let used = cursor.pos();
        if sha1(&[&data[..used]]) != hash {
            return Err(HandshakeError::Hash("p_q_inner_data"));
        }
    }
    Ok(inner)
}

/// `SHA1(object) + object + padding`, AES-IGE encrypted.
fn hashed_and_encrypted(object: &[u8], key: &[u8; 32], iv: &[u8; 32]) -> Vec<u8> {
    let mut data = sha1(&[object]).to_vec();
    data.extend_from_slice(object);
    let padded = data.len().div_ceil(16) * 16;
    let start = data.len();
    data.resize(padded, 0);
    rand::rng().fill_bytes(&mut data[start..]);
    ige_encrypt(&mut data, key, iv);
    data
}

/// Decrypts `SHA1(object) + object + padding` and returns the object (with the padding), its
/// hash checked over the bytes the object occupies.
fn decrypted_and_checked(
    encrypted: &[u8],
    key: &[u8; 32],
    iv: &[u8; 32],
) -> Result<Vec<u8>, HandshakeError> {
    if encrypted.len() < 36 || !encrypted.len().is_multiple_of(16) {
        return Err(HandshakeError::Malformed("encrypted_data"));
    }
    let mut plain = encrypted.to_vec();
    ige_decrypt(&mut plain, key, iv);
    let object = plain[20..].to_vec();
    // The object's length is whatever parses; the padding is under 16 bytes, so one of the
    // last 16 possible ends is the right one.
    let ok = (object.len().saturating_sub(15)..=object.len())
        .any(|end| sha1(&[&object[..end]])[..] == plain[..20]);
    if !ok {
        return Err(HandshakeError::Hash("encrypted_data"));
    }
    Ok(object)
}

/// A random DH secret and `g^a mod p` inside the range both sides check.
fn dh_secret(prime: &BigUint) -> (BigUint, BigUint) {
    let mut rng = rand::rng();
    loop {
        let mut bytes = [0u8; 256];
        rng.fill_bytes(&mut bytes);
        let a = BigUint::from_bytes_be(&bytes);
        let g_a = BigUint::from(G as u32).modpow(&a, prime);
        if in_safe_range(&g_a, prime) {
            return (a, g_a);
        }
    }
}

/// `2^(2048-64) <= x <= p - 2^(2048-64)` (which implies `1 < x < p - 1`).
fn in_safe_range(x: &BigUint, prime: &BigUint) -> bool {
    let bound = BigUint::from(1u32) << (2048 - 64);
    x >= &bound && prime >= &bound && x <= &(prime - &bound)
}

fn left_pad_256(bytes: &[u8]) -> [u8; 256] {
    let mut out = [0u8; 256];
    let take = bytes.len().min(256);
    out[256 - take..].copy_from_slice(&bytes[bytes.len() - take..]);
    out
}

/// Big-endian bytes without leading zeros, as `pq`, `p` and `q` travel.
fn trimmed(bytes: &[u8]) -> Vec<u8> {
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    bytes[first..].to_vec()
}

/// A TL object with its constructor id in front.
pub fn boxed<T: Serializable + Identifiable>(object: &T) -> Vec<u8> {
    let mut out = T::CONSTRUCTOR_ID.to_le_bytes().to_vec();
    object.serialize(&mut out);
    out
}

/// Two distinct random 32-bit primes, smaller first (stock clients expect 32-bit factors).
fn random_factors(rng: &mut impl Rng) -> (u32, u32) {
    let p = random_prime(rng);
    loop {
        let q = random_prime(rng);
        if q != p {
            return (p.min(q), p.max(q));
        }
    }
}

fn random_prime(rng: &mut impl Rng) -> u32 {
    loop {
        // Below √2⁶³ so pq < 2⁶³: stock clients read pq as a signed big-endian integer.
        let candidate = rng.random_range(1u32 << 31..3_037_000_499) | 1;
        if is_prime(candidate) {
            return candidate;
        }
    }
}

fn is_prime(n: u32) -> bool {
    if n < 2 {
        return false;
    }
    let n = u64::from(n);
    let mut d = 2u64;
    while d * d <= n {
        if n % d == 0 {
            return false;
        }
        d += 1;
    }
    true
}

/// Pollard's rho (Brent's variant) for the client: `pq` is a product of two 32-bit primes.
fn factorize(pq: u64) -> (u64, u64) {
    if pq.is_multiple_of(2) {
        return (2, pq / 2);
    }
    let mul = |a: u64, b: u64| ((u128::from(a) * u128::from(b)) % u128::from(pq)) as u64;
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    for c in 1..u64::MAX {
        let f = |x: u64| (mul(x, x) + c) % pq;
        let (mut x, mut y, mut d) = (2u64, 2u64, 1u64);
        while d == 1 {
            x = f(x);
            y = f(f(y));
            d = gcd(x.abs_diff(y), pq);
        }
        if d != pq {
            let other = pq / d;
            return (d.min(other), d.max(other));
        }
    }
    (1, pq)
}

/// The client side, driven by the caller's transport: each method takes the server's last
/// answer and returns the next request body.
pub struct ClientHandshake {
    key: ClientKey,
    rsa_pad: bool,
    temp_expires_in: Option<i32>,
    nonce: [u8; 16],
    server_nonce: [u8; 16],
    new_nonce: [u8; 32],
    aes: ([u8; 32], [u8; 32]),
    prime: BigUint,
    g_a: BigUint,
    g: u32,
}

impl ClientHandshake {
    /// `rsa_pad` picks RSA_PAD over the legacy encryption; `temp_expires_in` asks for a
    /// temporary key.
    pub fn new(key: ClientKey, rsa_pad: bool, temp_expires_in: Option<i32>) -> ClientHandshake {
        let mut rng = rand::rng();
        let mut nonce = [0u8; 16];
        rng.fill_bytes(&mut nonce);
        let mut new_nonce = [0u8; 32];
        rng.fill_bytes(&mut new_nonce);
        ClientHandshake {
            key,
            rsa_pad,
            temp_expires_in,
            nonce,
            server_nonce: [0; 16],
            new_nonce,
            aes: ([0; 32], [0; 32]),
            prime: BigUint::default(),
            g_a: BigUint::default(),
            g: 0,
        }
    }

    pub fn req_pq(&self) -> Vec<u8> {
        functions::ReqPqMulti { nonce: self.nonce }.to_bytes()
    }

    pub fn req_dh_params(&mut self, res_pq: &[u8]) -> Result<Vec<u8>, HandshakeError> {
        let answer: types::ResPq = read_boxed(res_pq, "resPQ")?;
        if answer.nonce != self.nonce {
            return Err(HandshakeError::Nonce);
        }
        if !answer
            .server_public_key_fingerprints
            .contains(&self.key.fingerprint())
        {
            return Err(HandshakeError::Fingerprint);
        }
        self.server_nonce = answer.server_nonce;
        let mut pq_bytes = [0u8; 8];
        let len = answer.pq.len().min(8);
        pq_bytes[8 - len..].copy_from_slice(&answer.pq[..len]);
        let (p, q) = factorize(u64::from_be_bytes(pq_bytes));
        let (p, q) = (trimmed(&p.to_be_bytes()), trimmed(&q.to_be_bytes()));
        let inner = match self.temp_expires_in {
            None => boxed(&types::PQInnerData {
                pq: answer.pq.clone(),
                p: p.clone(),
                q: q.clone(),
                nonce: self.nonce,
                server_nonce: self.server_nonce,
                new_nonce: self.new_nonce,
            }),
            Some(expires_in) => boxed(&types::PQInnerDataTempDc {
                pq: answer.pq.clone(),
                p: p.clone(),
                q: q.clone(),
                nonce: self.nonce,
                server_nonce: self.server_nonce,
                new_nonce: self.new_nonce,
                dc: 1,
                expires_in,
            }),
        };
        let encrypted_data = if self.rsa_pad {
            self.key.encrypt_pad(&inner)
        } else {
            self.key.encrypt_legacy(&inner)
        }
        .map_err(|_| HandshakeError::Malformed("p_q_inner_data"))?;
        Ok(functions::ReqDhParams {
            nonce: self.nonce,
            server_nonce: self.server_nonce,
            p,
            q,
            public_key_fingerprint: self.key.fingerprint(),
            encrypted_data,
        }
        .to_bytes())
    }

    /// Reads `server_DH_params_ok` and returns the `set_client_DH_params` request and the
    /// key it will make.
    pub fn set_client_dh_params(
        &mut self,
        server_dh: &[u8],
    ) -> Result<(Vec<u8>, AuthKey), HandshakeError> {
        let answer: types::ServerDhParamsOk = read_boxed(server_dh, "server_DH_params_ok")?;
        if answer.nonce != self.nonce || answer.server_nonce != self.server_nonce {
            return Err(HandshakeError::Nonce);
        }
        self.aes = handshake_aes(&self.server_nonce, &self.new_nonce);
        let plain = decrypted_and_checked(&answer.encrypted_answer, &self.aes.0, &self.aes.1)?;
        let inner: types::ServerDhInnerData = read_boxed(&plain, "server_DH_inner_data")?;
        if inner.nonce != self.nonce || inner.server_nonce != self.server_nonce {
            return Err(HandshakeError::Nonce);
        }
        self.prime = BigUint::from_bytes_be(&inner.dh_prime);
        self.g_a = BigUint::from_bytes_be(&inner.g_a);
        self.g = u32::try_from(inner.g).map_err(|_| HandshakeError::DhRange)?;
        if !in_safe_range(&self.g_a, &self.prime) {
            return Err(HandshakeError::DhRange);
        }
        let mut rng = rand::rng();
        let (b, g_b) = loop {
            let mut bytes = [0u8; 256];
            rng.fill_bytes(&mut bytes);
            let b = BigUint::from_bytes_be(&bytes);
            let g_b = BigUint::from(self.g).modpow(&b, &self.prime);
            if in_safe_range(&g_b, &self.prime) {
                break (b, g_b);
            }
        };
        let inner = boxed(&types::ClientDhInnerData {
            nonce: self.nonce,
            server_nonce: self.server_nonce,
            retry_id: 0,
            g_b: g_b.to_bytes_be(),
        });
        let encrypted_data = hashed_and_encrypted(&inner, &self.aes.0, &self.aes.1);
        let key = AuthKey::from_bytes(left_pad_256(
            &self.g_a.modpow(&b, &self.prime).to_bytes_be(),
        ));
        let request = functions::SetClientDhParams {
            nonce: self.nonce,
            server_nonce: self.server_nonce,
            encrypted_data,
        }
        .to_bytes();
        Ok((request, key))
    }

    /// Checks `dh_gen_ok` and returns the first server salt.
    pub fn finish(&self, dh_gen: &[u8], key: &AuthKey) -> Result<i64, HandshakeError> {
        let answer: types::DhGenOk = read_boxed(dh_gen, "dh_gen_ok")?;
        if answer.nonce != self.nonce || answer.server_nonce != self.server_nonce {
            return Err(HandshakeError::Nonce);
        }
        if answer.new_nonce_hash1 != key.new_nonce_hash(&self.new_nonce, 1) {
            return Err(HandshakeError::Hash("new_nonce_hash1"));
        }
        Ok(i64::from_le_bytes(std::array::from_fn(|i| {
            self.new_nonce[i] ^ self.server_nonce[i]
        })))
    }
}

fn read_boxed<T: Deserializable + Identifiable>(
    body: &[u8],
    what: &'static str,
) -> Result<T, HandshakeError> {
    let id = oxigram_tl::constructor_id(body).ok_or(HandshakeError::Malformed(what))?;
    if id != T::CONSTRUCTOR_ID {
        return Err(HandshakeError::Unexpected(id));
    }
    T::deserialize(&mut Cursor::from_slice(&body[4..])).map_err(|_| HandshakeError::Malformed(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rsa_pad: bool, temp: Option<i32>) -> Result<(), HandshakeError> {
        let server_key = ServerKey::generate().map_err(|_| HandshakeError::Malformed("key"))?;
        let mut server = ServerHandshake::new();
        let mut client = ClientHandshake::new(server_key.public(), rsa_pad, temp);
        let reply = |step: Step| match step {
            Step::Reply(bytes) => bytes,
            Step::Done(..) => panic!("done too early"),
        };
        let res_pq = reply(server.handle(&server_key, &client.req_pq(), 1_700_000_000)?);
        let req_dh = client.req_dh_params(&res_pq)?;
        let server_dh = reply(server.handle(&server_key, &req_dh, 1_700_000_000)?);
        let (set_dh, client_key) = client.set_client_dh_params(&server_dh)?;
        let Step::Done(dh_gen, new_key) = server.handle(&server_key, &set_dh, 1_700_000_000)?
        else {
            panic!("handshake did not finish");
        };
        assert_eq!(new_key.key.bytes(), client_key.bytes());
        assert_eq!(new_key.expires_in, temp);
        assert_eq!(
            new_key.expires_at,
            temp.map(|s| 1_700_000_000 + i64::from(s))
        );
        assert_eq!(client.finish(&dh_gen, &client_key)?, new_key.salt);
        Ok(())
    }

    #[test]
    fn legacy_rsa_and_rsa_pad_make_the_same_key_on_both_sides() -> Result<(), HandshakeError> {
        run(false, None)?;
        run(true, None)?;
        run(true, Some(3600))
    }

    #[test]
    fn factorization_finds_32_bit_factors() {
        let mut rng = rand::rng();
        let (p, q) = random_factors(&mut rng);
        assert_eq!(
            factorize(u64::from(p) * u64::from(q)),
            (u64::from(p), u64::from(q))
        );
    }

    #[test]
    fn out_of_order_messages_are_refused() -> Result<(), HandshakeError> {
        let server_key = ServerKey::generate().map_err(|_| HandshakeError::Malformed("key"))?;
        let mut server = ServerHandshake::new();
        let request = functions::SetClientDhParams {
            nonce: [0; 16],
            server_nonce: [0; 16],
            encrypted_data: vec![0; 48],
        }
        .to_bytes();
        assert!(matches!(
            server.handle(&server_key, &request, 0),
            Err(HandshakeError::Unexpected(_))
        ));
        assert!(server.handle(&server_key, &[1, 2], 0).is_err());
        Ok(())
    }
}
