//! The decoder fuzzing run: random and mutated inputs through the framing, the envelope, the
//! session and auth key creation, counting them; any panic aborts the run. `cargo run
//! --release -p oxigram-mtproto --example fuzz_decoders -- [inputs]` (default 1,000,000).
//!
//! A quarter of the inputs are auth key creation messages (see
//! `tests/support/handshake_inputs.rs`), mixed so that the kinds that cost milliseconds (RSA
//! decryption, the DH computation) are a few per thousand and the run stays minutes long.

#[path = "../tests/support/handshake_inputs.rs"]
mod handshake_inputs;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use handshake_inputs::{Inputs, Outcome};
use oxigram_mtproto::crypto::Direction;
use oxigram_mtproto::envelope::{Message, Plain};
use oxigram_mtproto::handshake::ServerHandshake;
use oxigram_mtproto::session::Session;
use oxigram_mtproto::transport::{Detected, Framing, Kind};
use oxigram_mtproto::{AuthKey, ServerKey, wire};
use oxigram_tl::{Identifiable, functions};
use rand::{Rng, RngCore};
use tokio::sync::mpsc;

const KINDS: [(Kind, bool); 7] = [
    (Kind::Abridged, false),
    (Kind::Intermediate, false),
    (Kind::PaddedIntermediate, false),
    (Kind::Full, false),
    (Kind::Abridged, true),
    (Kind::Intermediate, true),
    (Kind::PaddedIntermediate, true),
];
/// Constructors the session treats specially, so mutated bodies reach every branch.
const HEADS: [u32; 9] = [
    wire::MSG_CONTAINER,
    wire::GZIP_PACKED,
    0x62d6_b459,
    0x7abe_77ec,
    0xda9b_0d0d,
    0xc1cd_5ea9,
    0xcdd4_2a05,
    0xb921_bd04,
    0xe751_2126,
];

/// The constructors of auth key creation's requests.
const HANDSHAKE_HEADS: [u32; 4] = [
    functions::ReqPqMulti::CONSTRUCTOR_ID,
    functions::ReqPq::CONSTRUCTOR_ID,
    functions::ReqDhParams::CONSTRUCTOR_ID,
    functions::SetClientDhParams::CONSTRUCTOR_ID,
];

/// Per thousand handshake inputs, by kind.
const HANDSHAKE_MIX: [(handshake_inputs::Kind, u64); 7] = [
    (handshake_inputs::Kind::Random, 400),
    (handshake_inputs::Kind::ReqPq, 150),
    (handshake_inputs::Kind::DhParamsPlain, 300),
    (handshake_inputs::Kind::ClientDh, 130),
    (handshake_inputs::Kind::DhParamsRsa, 10),
    (handshake_inputs::Kind::DhParamsInner, 8),
    (handshake_inputs::Kind::ClientDhInner, 2),
];

/// The kind of the `h`-th handshake input.
fn handshake_kind(h: u64) -> handshake_inputs::Kind {
    let mut at = h % 1000;
    for (kind, share) in HANDSHAKE_MIX {
        if at < share {
            return kind;
        }
        at -= share;
    }
    handshake_inputs::Kind::Random
}

fn main() {
    let inputs: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    assert!(
        handshake_inputs::KINDS
            .iter()
            .all(|kind| HANDSHAKE_MIX.iter().any(|(mixed, _)| mixed == kind)),
        "every kind of handshake input is in the mix"
    );
    let key = AuthKey::from_bytes(std::array::from_fn(|i| (i * 17 + 3) as u8));
    let server_key = ServerKey::generate().unwrap_or_else(|e| panic!("{e}"));
    let mut handshakes = Inputs::new(server_key.clone());
    let (mut handshake_inputs, mut plain_bodies) = (0u64, 0u64);
    let (mut answered, mut keys_made, mut handshake_refused) = (0u64, 0u64, 0u64);
    let (push, _rx) = mpsc::unbounded_channel();
    let mut session = Session::new(key.clone(), Some(5), push);
    let mut rng = rand::rng();
    let (mut frames, mut refused, mut messages) = (0u64, 0u64, 0u64);
    let started = Instant::now();
    for n in 0..inputs {
        let mut bytes = vec![0u8; rng.random_range(0..512)];
        rng.fill_bytes(&mut bytes);
        match n % 4 {
            // Random bytes as a connection's first bytes.
            0 => {}
            // A valid frame of some transport, mutated; half of them hold an unencrypted
            // envelope (auth key creation's) around a body that starts like a handshake step.
            1 => {
                let (kind, obfuscated) = KINDS[rng.random_range(0..KINDS.len())];
                let (mut client, mut stream) = Framing::client(kind, obfuscated);
                bytes.truncate(bytes.len() / 4 * 4);
                if rng.random_bool(0.5) {
                    let head = HANDSHAKE_HEADS[rng.random_range(0..HANDSHAKE_HEADS.len())];
                    let n = bytes.len().min(4);
                    bytes[..n].copy_from_slice(&head.to_le_bytes()[..n]);
                    bytes = Plain {
                        msg_id: rng.random(),
                        body: bytes,
                    }
                    .encode();
                }
                client.encode(&bytes, &mut stream);
                for _ in 0..rng.random_range(0..4) {
                    let at = rng.random_range(0..stream.len());
                    stream[at] ^= rng.random_range(1..=255u8);
                }
                bytes = stream;
            }
            // An auth key creation message for the step a server waits for.
            3 => {
                handshake_inputs += 1;
                match handshakes.run(handshake_kind(n / 4), &mut rng) {
                    Outcome::Refused => handshake_refused += 1,
                    Outcome::Replied => answered += 1,
                    Outcome::KeyMade => keys_made += 1,
                }
                continue;
            }
            // A validly encrypted message with a random body.
            _ => {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or(0);
                let mut body = HEADS[rng.random_range(0..HEADS.len())]
                    .to_le_bytes()
                    .to_vec();
                body.extend_from_slice(&bytes[..bytes.len() / 4 * 4]);
                let message = Message {
                    salt: 5,
                    session_id: 1,
                    msg_id: (now << 32) + 4 * n as i64,
                    seq_no: rng.random_range(0..4),
                    body,
                };
                let frame = message.encrypt(&key, Direction::ClientToServer);
                if let Ok(decrypted) = Message::decrypt(&key, Direction::ClientToServer, &frame) {
                    messages += 1;
                    let actions = session.receive(decrypted);
                    for reply in &actions.send {
                        let _ = session.seal(reply);
                    }
                }
                continue;
            }
        }
        match Framing::detect(&bytes) {
            Ok(Detected::Framing(mut framing, header)) => {
                let mut buf = bytes[header.min(bytes.len())..].to_vec();
                loop {
                    match framing.decode(&mut buf) {
                        Ok(Some(frame)) => {
                            frames += 1;
                            if let Ok(plain) = Plain::decode(&frame) {
                                // As the server does with a frame under key id 0.
                                plain_bodies += 1;
                                let _ = ServerHandshake::new().handle(
                                    &server_key,
                                    &plain.body,
                                    1_700_000_000,
                                );
                            }
                            if Message::decrypt(&key, Direction::ClientToServer, &frame).is_err() {
                                refused += 1;
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {
                            refused += 1;
                            break;
                        }
                    }
                }
            }
            Ok(Detected::NeedMore) => {}
            Err(_) => refused += 1,
        }
    }
    let elapsed = started.elapsed();
    println!(
        "{inputs} inputs in {:.1}s ({:.0}/s): {frames} frames decoded ({plain_bodies} unencrypted bodies through the handshake), {messages} messages through the session, {refused} refused, no panic",
        elapsed.as_secs_f64(),
        inputs as f64 / elapsed.as_secs_f64()
    );
    println!(
        "{handshake_inputs} auth key creation messages: {} through RSA decryption, {answered} answered, {keys_made} keys made, {handshake_refused} refused",
        handshakes.rsa_decryptions
    );
}
