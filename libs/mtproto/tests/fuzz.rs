//! Property tests of every decoder that reads network input: random and mutated frames,
//! envelopes, message bodies and auth key creation messages never panic; they decode or are
//! refused.

#[path = "support/handshake_inputs.rs"]
mod handshake_inputs;

use std::sync::{LazyLock, Mutex, PoisonError};

use handshake_inputs::{Inputs, KINDS, Outcome};
use oxigram_mtproto::crypto::Direction;
use oxigram_mtproto::envelope::{Message, Plain};
use oxigram_mtproto::handshake::ServerHandshake;
use oxigram_mtproto::session::Session;
use oxigram_mtproto::transport::{Detected, Framing, Kind};
use oxigram_mtproto::{AuthKey, ServerKey, wire};
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::mpsc;

static SERVER_KEY: LazyLock<ServerKey> =
    LazyLock::new(|| ServerKey::generate().unwrap_or_else(|e| panic!("{e}")));

/// One set of handshake servers for all cases (making one waiting for the last step takes
/// two RSA and DH computations).
static HANDSHAKES: LazyLock<Mutex<Inputs>> =
    LazyLock::new(|| Mutex::new(Inputs::new(SERVER_KEY.clone())));

fn handshake_input(kind: handshake_inputs::Kind, seed: u64) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    // A case that panicked leaves the servers as they were: later cases go on with them.
    let mut inputs = HANDSHAKES.lock().unwrap_or_else(PoisonError::into_inner);
    inputs.run(kind, &mut rng)
}

fn key() -> AuthKey {
    AuthKey::from_bytes(std::array::from_fn(|i| (i * 17 + 3) as u8))
}

/// A valid frame of `kind` around `payload`, then `flips` applied (index, xor).
fn mutated_frame(kind: Kind, obfuscated: bool, payload: &[u8], flips: &[(usize, u8)]) -> Vec<u8> {
    let (mut client, mut wire) = Framing::client(kind, obfuscated);
    client.encode(payload, &mut wire);
    for &(at, xor) in flips {
        if !wire.is_empty() {
            let at = at % wire.len();
            wire[at] ^= xor;
        }
    }
    wire
}

fn drain(bytes: &[u8]) {
    if let Ok(Detected::Framing(mut framing, header)) = Framing::detect(bytes) {
        let mut buf = bytes[header.min(bytes.len())..].to_vec();
        while let Ok(Some(frame)) = framing.decode(&mut buf) {
            if let Ok(plain) = Plain::decode(&frame) {
                let _ = ServerHandshake::new().handle(&SERVER_KEY, &plain.body, 1_700_000_000);
            }
            let _ = Message::decrypt(&key(), Direction::ClientToServer, &frame);
        }
    }
}

fn kinds() -> impl Strategy<Value = (Kind, bool)> {
    prop_oneof![
        Just((Kind::Abridged, false)),
        Just((Kind::Intermediate, false)),
        Just((Kind::PaddedIntermediate, false)),
        Just((Kind::Full, false)),
        Just((Kind::Abridged, true)),
        Just((Kind::Intermediate, true)),
        Just((Kind::PaddedIntermediate, true)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic_the_framing(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        drain(&bytes);
    }

    /// Half of the frames hold an unencrypted envelope, which the server hands to auth key
    /// creation.
    #[test]
    fn mutated_frames_never_panic(
        (kind, obfuscated) in kinds(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        flips in proptest::collection::vec((any::<usize>(), 1..=255u8), 0..4),
        plain in any::<bool>(),
    ) {
        let mut payload = payload;
        payload.truncate(payload.len() / 4 * 4);
        if plain {
            payload = Plain { msg_id: 1 << 32, body: payload }.encode();
            prop_assert!(Plain::decode(&payload).is_ok());
        }
        drain(&mutated_frame(kind, obfuscated, &payload, &flips));
    }

    /// Bodies that passed the envelope's checks (validly encrypted garbage): the session's
    /// service-message and wrapper parsing must refuse them without panicking.
    #[test]
    fn any_body_in_a_valid_envelope_never_panics_the_session(
        body in proptest::collection::vec(any::<u8>(), 0..400),
        head in prop_oneof![
            Just(wire::MSG_CONTAINER), Just(wire::GZIP_PACKED), Just(0x62d6_b459u32),
            Just(0x7abe_77ecu32), Just(0xda9b_0d0du32), Just(0xc1cd_5ea9u32), Just(0xcdd4_2a05u32),
            Just(0xb921_bd04u32), Just(0xe751_2126u32), any::<u32>()
        ],
        seq_no in 0..4i32,
    ) {
        let (push, _rx) = mpsc::unbounded_channel();
        let mut session = Session::new(key(), Some(5), push);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let mut full = head.to_le_bytes().to_vec();
        full.extend_from_slice(&body[..body.len() / 4 * 4]);
        let message = Message { salt: 5, session_id: 1, msg_id: now << 32, seq_no, body: full };
        let frame = message.encrypt(&key(), Direction::ClientToServer);
        let decrypted = Message::decrypt(&key(), Direction::ClientToServer, &frame);
        prop_assert!(decrypted.is_ok());
        if let Ok(decrypted) = decrypted {
            let actions = session.receive(decrypted);
            for reply in &actions.send {
                let _ = session.seal(reply);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// The kinds that stop before RSA decryption and DH (cheap enough for many cases).
    #[test]
    fn random_and_mutated_handshake_messages_never_panic_the_server(
        kind in prop_oneof![
            Just(handshake_inputs::Kind::Random),
            Just(handshake_inputs::Kind::ReqPq),
            Just(handshake_inputs::Kind::DhParamsPlain),
            Just(handshake_inputs::Kind::ClientDh),
        ],
        seed in any::<u64>(),
    ) {
        let outcome = handshake_input(kind, seed);
        // Only the last step makes a key, and only from an intact client_DH_inner_data.
        prop_assert!(outcome != Outcome::KeyMade || kind == handshake_inputs::Kind::ClientDh);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// The kinds that go through RSA decryption or the DH computation.
    #[test]
    fn handshake_messages_through_rsa_and_dh_never_panic_the_server(
        kind in prop_oneof![
            Just(handshake_inputs::Kind::DhParamsRsa),
            Just(handshake_inputs::Kind::DhParamsInner),
            Just(handshake_inputs::Kind::ClientDhInner),
        ],
        seed in any::<u64>(),
    ) {
        let outcome = handshake_input(kind, seed);
        prop_assert!(
            outcome != Outcome::KeyMade || kind == handshake_inputs::Kind::ClientDhInner
        );
    }
}

/// The inputs reach what they are for: each kind is refused some of the time, a mutated
/// req_DH_params goes through RSA decryption, an intact inner data moves the server on, and
/// an intact client_DH_inner_data makes a key. Without this, a fuzz run could refuse every
/// input at its first check and prove nothing.
#[test]
fn every_handshake_input_kind_reaches_its_step() {
    let mut inputs = Inputs::new(SERVER_KEY.clone());
    let mut rng = StdRng::seed_from_u64(20);
    for kind in KINDS {
        let outcomes: Vec<Outcome> = (0..40).map(|_| inputs.run(kind, &mut rng)).collect();
        assert!(
            outcomes.contains(&Outcome::Refused),
            "{kind:?}: {outcomes:?}"
        );
        let moved_on = match kind {
            handshake_inputs::Kind::ReqPq | handshake_inputs::Kind::DhParamsInner => {
                outcomes.contains(&Outcome::Replied)
            }
            handshake_inputs::Kind::ClientDhInner => outcomes.contains(&Outcome::KeyMade),
            _ => true,
        };
        assert!(moved_on, "{kind:?}: {outcomes:?}");
    }
    assert!(inputs.rsa_decryptions >= 40, "{}", inputs.rsa_decryptions);
}
