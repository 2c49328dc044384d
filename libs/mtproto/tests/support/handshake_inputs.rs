//! Auth key creation inputs for fuzzing [`ServerHandshake::handle`]: random bodies, and valid
//! messages of each step, mutated, fed to a server waiting for that step. To reach the checks
//! behind the encryption, `p_q_inner_data` and `client_DH_inner_data` are also mutated *before*
//! being encrypted properly, so RSA decryption, the inner data's parsing and its nonce, factor,
//! hash and DH range checks all see them. Shared by `tests/fuzz.rs` and
//! `examples/fuzz_decoders.rs` (included by path: it is test code, not the crate's API).

use oxigram_mtproto::ServerKey;
use oxigram_mtproto::crypto::{handshake_aes, ige_encrypt, sha1};
use oxigram_mtproto::handshake::{ClientHandshake, ServerHandshake, Step, boxed};
use oxigram_mtproto::rsa_key::ClientKey;
use oxigram_tl::{Cursor, Deserializable, Identifiable, Serializable, functions, types};
use rand::Rng;

/// Which step an input is for, and how it is broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Random bytes, usually behind a handshake constructor, to a server at its first step
    /// or waiting for `req_DH_params`.
    Random,
    /// A valid `req_pq_multi`, mutated.
    ReqPq,
    /// A valid `req_DH_params` whose plain fields (nonces, p, q, fingerprint) are cut or
    /// changed: refused before RSA decryption.
    DhParamsPlain,
    /// A valid `req_DH_params` whose `encrypted_data` is mutated or random: RSA decryption runs.
    DhParamsRsa,
    /// `p_q_inner_data` in one of its four forms, mutated (sometimes not), properly encrypted
    /// with legacy RSA or RSA_PAD: decryption and every check of the inner data run.
    DhParamsInner,
    /// A valid `set_client_DH_params`, mutated anywhere.
    ClientDh,
    /// `client_DH_inner_data`, mutated (sometimes not), properly encrypted: its checks run, and
    /// the key is computed when it is valid.
    ClientDhInner,
}

pub const KINDS: [Kind; 7] = [
    Kind::Random,
    Kind::ReqPq,
    Kind::DhParamsPlain,
    Kind::DhParamsRsa,
    Kind::DhParamsInner,
    Kind::ClientDh,
    Kind::ClientDhInner,
];

/// What the server did with an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Refused,
    Replied,
    KeyMade,
}

/// A server that answered `req_pq_multi`, and the valid `req_DH_params` a client made for it.
struct WaitingForDh {
    server: ServerHandshake,
    request: functions::ReqDhParams,
    pq: Vec<u8>,
}

/// A server that answered `req_DH_params` for a known `new_nonce`.
struct WaitingForClientDh {
    server: ServerHandshake,
    nonce: [u8; 16],
    server_nonce: [u8; 16],
    new_nonce: [u8; 32],
}

/// `g_b` inside the range the server accepts (2^2000; the prime is just under 2^2048).
fn in_range_g_b() -> Vec<u8> {
    let mut g_b = vec![0u8; 251];
    g_b[0] = 1;
    g_b
}

/// The handshake inputs and the servers they go to; a server whose step an input completed is
/// made again for the next one.
pub struct Inputs {
    key: ServerKey,
    public: ClientKey,
    for_dh: Option<WaitingForDh>,
    for_client_dh: Option<WaitingForClientDh>,
    /// How many inputs went through RSA decryption.
    pub rsa_decryptions: u64,
}

impl Inputs {
    pub fn new(key: ServerKey) -> Inputs {
        let public = key.public();
        Inputs {
            key,
            public,
            for_dh: None,
            for_client_dh: None,
            rsa_decryptions: 0,
        }
    }

    /// One input of `kind` to a server waiting for its step; a panic is the finding.
    pub fn run(&mut self, kind: Kind, rng: &mut impl Rng) -> Outcome {
        match kind {
            Kind::Random => {
                // Half to a server at its first step, half to one waiting for req_DH_params; a
                // req_pq_multi, which only starts over, goes to the first kind.
                let fresh = rng.random_bool(0.5);
                let heads = [
                    functions::ReqPqMulti::CONSTRUCTOR_ID,
                    functions::ReqDhParams::CONSTRUCTOR_ID,
                    functions::SetClientDhParams::CONSTRUCTOR_ID,
                    rng.random(),
                ];
                let first = if fresh { 0 } else { 1 };
                let mut body = heads[rng.random_range(first..heads.len())]
                    .to_le_bytes()
                    .to_vec();
                let mut tail = vec![0u8; rng.random_range(0..300)];
                rng.fill_bytes(&mut tail);
                body.extend_from_slice(&tail);
                if rng.random_bool(0.5) {
                    body.truncate(rng.random_range(0..=body.len()));
                }
                // Random nonces never match, so none of these reaches RSA decryption.
                if fresh {
                    let mut server = ServerHandshake::new();
                    outcome(server.handle(&self.key, &body, 1_700_000_000))
                } else {
                    self.hand_to_dh_server(&body)
                }
            }
            Kind::ReqPq => {
                let mut body = functions::ReqPqMulti {
                    nonce: rng.random(),
                }
                .to_bytes();
                mutate(&mut body, rng);
                let mut server = ServerHandshake::new();
                outcome(server.handle(&self.key, &body, 1_700_000_000))
            }
            Kind::DhParamsPlain => {
                let request = self.waiting_for_dh().request.clone();
                let valid = request.to_bytes();
                // Everything up to encrypted_data's length. A change in the padding of p or q
                // leaves the same request, which would go through RSA: drawn again.
                let plain = valid.len() - request.encrypted_data.len() - 4;
                let body = loop {
                    let mut body = valid.clone();
                    let at = rng.random_range(0..plain);
                    if rng.random_bool(0.3) {
                        body.truncate(at);
                    } else {
                        body[at] ^= rng.random_range(1..=255u8);
                    }
                    let same = oxigram_tl::constructor_id(&body)
                        == Some(functions::ReqDhParams::CONSTRUCTOR_ID)
                        && functions::ReqDhParams::deserialize(&mut Cursor::from_slice(&body[4..]))
                            .is_ok_and(|parsed| parsed == request);
                    if !same {
                        break body;
                    }
                };
                self.hand_to_dh_server(&body)
            }
            Kind::DhParamsRsa => {
                let mut request = self.waiting_for_dh().request.clone();
                if rng.random_bool(0.3) {
                    rng.fill_bytes(&mut request.encrypted_data);
                } else {
                    mutate(&mut request.encrypted_data, rng);
                }
                if request.encrypted_data.len() == 256 {
                    self.rsa_decryptions += 1;
                }
                self.hand_to_dh_server(&request.to_bytes())
            }
            Kind::DhParamsInner => {
                let new_nonce: [u8; 32] = rng.random();
                let valid = rng.random_bool(0.25);
                let request = self.dh_params_inner(new_nonce, !valid, rng);
                self.rsa_decryptions += 1;
                let nonces = (request.nonce, request.server_nonce);
                let Some(mut waiting) = self.for_dh.take() else {
                    return Outcome::Refused;
                };
                let result = waiting
                    .server
                    .handle(&self.key, &request.to_bytes(), 1_700_000_000);
                let done = outcome(result);
                match done {
                    // The server went on to the next step: it waits for set_client_DH_params,
                    // under a new_nonce known here when the inner data was not mutated.
                    Outcome::Replied if valid => {
                        self.for_client_dh = Some(WaitingForClientDh {
                            server: waiting.server,
                            nonce: nonces.0,
                            server_nonce: nonces.1,
                            new_nonce,
                        });
                    }
                    Outcome::Refused => self.for_dh = Some(waiting),
                    _ => {}
                }
                done
            }
            Kind::ClientDh => {
                let Some(mut body) = self.client_dh(false, rng) else {
                    panic!("a valid p_q_inner_data was refused");
                };
                mutate(&mut body, rng);
                self.hand_to_client_dh_server(&body)
            }
            Kind::ClientDhInner => {
                let Some(body) = self.client_dh(rng.random_bool(0.75), rng) else {
                    panic!("a valid p_q_inner_data was refused");
                };
                self.hand_to_client_dh_server(&body)
            }
        }
    }

    fn waiting_for_dh(&mut self) -> &WaitingForDh {
        let (key, public) = (&self.key, &self.public);
        self.for_dh.get_or_insert_with(|| {
            let mut server = ServerHandshake::new();
            let mut client = ClientHandshake::new(public.clone(), true, None);
            let res_pq = match server.handle(key, &client.req_pq(), 1_700_000_000) {
                Ok(Step::Reply(reply)) => reply,
                other => panic!("req_pq_multi refused: {:?}", other.err()),
            };
            let pq = read::<types::ResPq>(&res_pq).pq;
            let body = client
                .req_dh_params(&res_pq)
                .unwrap_or_else(|e| panic!("{e}"));
            let request = read::<functions::ReqDhParams>(&body);
            WaitingForDh {
                server,
                request,
                pq,
            }
        })
    }

    /// Hands `body` to the server waiting for `req_DH_params`, which is made again if the
    /// input moved it on.
    fn hand_to_dh_server(&mut self, body: &[u8]) -> Outcome {
        self.waiting_for_dh();
        let Some(waiting) = self.for_dh.as_mut() else {
            return Outcome::Refused;
        };
        let done = outcome(waiting.server.handle(&self.key, body, 1_700_000_000));
        if done != Outcome::Refused {
            self.for_dh = None;
        }
        done
    }

    /// A `req_DH_params` carrying `p_q_inner_data` of a random form for the waiting server,
    /// mutated if `mutated`.
    fn dh_params_inner(
        &mut self,
        new_nonce: [u8; 32],
        mutated: bool,
        rng: &mut impl Rng,
    ) -> functions::ReqDhParams {
        let public = self.public.clone();
        let waiting = self.waiting_for_dh();
        let mut request = waiting.request.clone();
        let (pq, p, q) = (waiting.pq.clone(), request.p.clone(), request.q.clone());
        let (nonce, server_nonce) = (request.nonce, request.server_nonce);
        let mut inner = match rng.random_range(0..4) {
            0 => boxed(&types::PQInnerData {
                pq,
                p,
                q,
                nonce,
                server_nonce,
                new_nonce,
            }),
            1 => boxed(&types::PQInnerDataDc {
                pq,
                p,
                q,
                nonce,
                server_nonce,
                new_nonce,
                dc: 1,
            }),
            2 => boxed(&types::PQInnerDataTemp {
                pq,
                p,
                q,
                nonce,
                server_nonce,
                new_nonce,
                expires_in: 3600,
            }),
            _ => boxed(&types::PQInnerDataTempDc {
                pq,
                p,
                q,
                nonce,
                server_nonce,
                new_nonce,
                dc: 1,
                expires_in: 3600,
            }),
        };
        if mutated {
            mutate(&mut inner, rng);
        }
        inner.truncate(235);
        let encrypted = if inner.len() <= 144 && rng.random_bool(0.5) {
            public.encrypt_pad(&inner)
        } else {
            public.encrypt_legacy(&inner)
        };
        request.encrypted_data = encrypted.unwrap_or_else(|e| panic!("{e}"));
        request
    }

    /// A `set_client_DH_params` for the waiting server (made first if none waits), its inner
    /// data mutated if `mutated`.
    fn client_dh(&mut self, mutated: bool, rng: &mut impl Rng) -> Option<Vec<u8>> {
        if self.for_client_dh.is_none() {
            let new_nonce: [u8; 32] = rng.random();
            let request = self.dh_params_inner(new_nonce, false, rng);
            self.rsa_decryptions += 1;
            let mut waiting = self.for_dh.take()?;
            if waiting
                .server
                .handle(&self.key, &request.to_bytes(), 1_700_000_000)
                .is_ok()
            {
                self.for_client_dh = Some(WaitingForClientDh {
                    server: waiting.server,
                    nonce: request.nonce,
                    server_nonce: request.server_nonce,
                    new_nonce,
                });
            }
        }
        let waiting = self.for_client_dh.as_ref()?;
        let mut inner = boxed(&types::ClientDhInnerData {
            nonce: waiting.nonce,
            server_nonce: waiting.server_nonce,
            retry_id: 0,
            g_b: in_range_g_b(),
        });
        if mutated {
            mutate(&mut inner, rng);
        }
        let (aes_key, aes_iv) = handshake_aes(&waiting.server_nonce, &waiting.new_nonce);
        let mut data = sha1(&[&inner]).to_vec();
        data.extend_from_slice(&inner);
        let padded = data.len().div_ceil(16) * 16;
        let start = data.len();
        data.resize(padded, 0);
        rng.fill_bytes(&mut data[start..]);
        ige_encrypt(&mut data, &aes_key, &aes_iv);
        let request = functions::SetClientDhParams {
            nonce: waiting.nonce,
            server_nonce: waiting.server_nonce,
            encrypted_data: data,
        };
        Some(request.to_bytes())
    }

    fn hand_to_client_dh_server(&mut self, body: &[u8]) -> Outcome {
        let Some(waiting) = self.for_client_dh.as_mut() else {
            return Outcome::Refused;
        };
        let done = outcome(waiting.server.handle(&self.key, body, 1_700_000_000));
        if done != Outcome::Refused {
            self.for_client_dh = None;
        }
        done
    }
}

fn outcome<E>(result: Result<Step, E>) -> Outcome {
    match result {
        Ok(Step::Reply(_)) => Outcome::Replied,
        Ok(Step::Done(..)) => Outcome::KeyMade,
        Err(_) => Outcome::Refused,
    }
}

fn read<T: Deserializable + Identifiable>(body: &[u8]) -> T {
    assert_eq!(oxigram_tl::constructor_id(body), Some(T::CONSTRUCTOR_ID));
    T::deserialize(&mut Cursor::from_slice(&body[4..])).unwrap_or_else(|e| panic!("{e}"))
}

/// Changes `bytes` the ways a broken or hostile peer would: flipped bytes, a cut, bytes added,
/// a 4-byte word (a length or a constructor) set to an edge value.
pub fn mutate(bytes: &mut Vec<u8>, rng: &mut impl Rng) {
    match rng.random_range(0..4) {
        0 if !bytes.is_empty() => {
            for _ in 0..rng.random_range(1..=4) {
                let at = rng.random_range(0..bytes.len());
                bytes[at] ^= rng.random_range(1..=255u8);
            }
        }
        1 => bytes.truncate(rng.random_range(0..=bytes.len())),
        2 => {
            let mut more = vec![0u8; rng.random_range(1..=32)];
            rng.fill_bytes(&mut more);
            let at = rng.random_range(0..=bytes.len());
            bytes.splice(at..at, more);
        }
        _ if bytes.len() >= 4 => {
            let edges = [
                0u32,
                1,
                0xfe,
                0xfefe_fefe,
                0x7fff_ffff,
                u32::MAX,
                rng.random(),
            ];
            let word = edges[rng.random_range(0..edges.len())].to_le_bytes();
            let at = rng.random_range(0..=bytes.len() - 4);
            bytes[at..at + 4].copy_from_slice(&word);
        }
        _ => bytes.push(rng.random()),
    }
}
