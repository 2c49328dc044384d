//! Property tests of every decoder that reads network input: random and mutated frames,
//! envelopes and message bodies never panic; they decode or are refused.

use oxigram_mtproto::crypto::Direction;
use oxigram_mtproto::envelope::{Message, Plain};
use oxigram_mtproto::session::Session;
use oxigram_mtproto::transport::{Detected, Framing, Kind};
use oxigram_mtproto::{AuthKey, wire};
use proptest::prelude::*;
use tokio::sync::mpsc;

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
            let _ = Plain::decode(&frame);
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

    #[test]
    fn mutated_frames_never_panic(
        (kind, obfuscated) in kinds(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        flips in proptest::collection::vec((any::<usize>(), 1..=255u8), 0..4),
    ) {
        let mut payload = payload;
        payload.truncate(payload.len() / 4 * 4);
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
