//! The decoder fuzzing run: random and mutated inputs through the framing, the envelope and
//! the session, counting them; any panic aborts the run. `cargo run --release -p
//! oxigram-mtproto --example fuzz_decoders -- [inputs]` (default 1,000,000).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use oxigram_mtproto::crypto::Direction;
use oxigram_mtproto::envelope::{Message, Plain};
use oxigram_mtproto::session::Session;
use oxigram_mtproto::transport::{Detected, Framing, Kind};
use oxigram_mtproto::{AuthKey, wire};
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

fn main() {
    let inputs: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let key = AuthKey::from_bytes(std::array::from_fn(|i| (i * 17 + 3) as u8));
    let (push, _rx) = mpsc::unbounded_channel();
    let mut session = Session::new(key.clone(), Some(5), push);
    let mut rng = rand::rng();
    let (mut frames, mut refused, mut messages) = (0u64, 0u64, 0u64);
    let started = Instant::now();
    for n in 0..inputs {
        let mut bytes = vec![0u8; rng.random_range(0..512)];
        rng.fill_bytes(&mut bytes);
        match n % 3 {
            // Random bytes as a connection's first bytes.
            0 => {}
            // A valid frame of some transport, mutated.
            1 => {
                let (kind, obfuscated) = KINDS[rng.random_range(0..KINDS.len())];
                let (mut client, mut stream) = Framing::client(kind, obfuscated);
                bytes.truncate(bytes.len() / 4 * 4);
                client.encode(&bytes, &mut stream);
                for _ in 0..rng.random_range(0..4) {
                    let at = rng.random_range(0..stream.len());
                    stream[at] ^= rng.random_range(1..=255u8);
                }
                bytes = stream;
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
                            let _ = Plain::decode(&frame);
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
        "{inputs} inputs in {:.1}s ({:.0}/s): {frames} frames decoded, {messages} messages through the session, {refused} refused, no panic",
        elapsed.as_secs_f64(),
        inputs as f64 / elapsed.as_secs_f64()
    );
}
