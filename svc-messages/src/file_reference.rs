//! File references: what a reader of a media message presents to download its file. A
//! reference names the reader, her box id of the message, the content and when it was given,
//! under an HMAC-SHA-256 with this service's key, so only this service makes them and a reader
//! cannot make one for a message or a time it was not given. It expires: a reader whose
//! reference is too old reads the message again (any read gives a fresh one), as Telegram's
//! FILE_REFERENCE_EXPIRED asks. The right itself is the box: the check also finds the box.

use std::sync::OnceLock;

use oxigram_proto::types::v1::MessageMedia;
use sha2::{Digest, Sha256};

/// The key and lifetime references are made with, set once at start-up.
struct Settings {
    key: Vec<u8>,
    ttl_seconds: i64,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// The defaults of `[media]`, for a process that never set its own (a store test).
const DEFAULT_KEY: &[u8] = b"oxigram-development-file-reference-key";
const DEFAULT_TTL_SECONDS: i64 = 7200;

/// Bytes of the MAC a reference keeps.
const MAC_BYTES: usize = 16;
/// How far ahead of this server's clock a reference may be dated (another instance's clock).
const CLOCK_SKEW_SECONDS: i64 = 60;

/// Sets the key and lifetime of references (the first call wins: one per process).
pub fn configure(key: &str, ttl_seconds: i64) {
    let _ = SETTINGS.set(Settings {
        key: key.as_bytes().to_vec(),
        ttl_seconds: ttl_seconds.max(1),
    });
}

fn settings() -> (&'static [u8], i64) {
    match SETTINGS.get() {
        Some(s) => (&s.key, s.ttl_seconds),
        None => (DEFAULT_KEY, DEFAULT_TTL_SECONDS),
    }
}

/// HMAC-SHA-256 (RFC 2104) of `message` under `key`.
fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|k| k ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn mac(owner_id: i64, box_id: i64, file_id: i64, issued: i64) -> [u8; MAC_BYTES] {
    let mut message = Vec::with_capacity(32);
    for n in [owner_id, box_id, file_id, issued] {
        message.extend_from_slice(&n.to_be_bytes());
    }
    let (key, _) = settings();
    let full = hmac(key, &message);
    let mut out = [0u8; MAC_BYTES];
    out.copy_from_slice(&full[..MAC_BYTES]);
    out
}

/// A reference for `owner_id`'s box `box_id` of a message with content `file_id`, given at
/// `now` (Unix seconds).
pub fn make(owner_id: i64, box_id: i64, file_id: i64, now: i64) -> Vec<u8> {
    let mut reference = now.to_be_bytes().to_vec();
    reference.extend_from_slice(&mac(owner_id, box_id, file_id, now));
    reference
}

/// Gives `media`, as `owner_id`'s box `box_id` holds it, a fresh reference.
pub fn stamp(owner_id: i64, box_id: i64, media: &mut MessageMedia) {
    let now = chrono::Utc::now().timestamp();
    media.file_reference = make(owner_id, box_id, media.file_id, now);
}

/// Why a reference does not open a file.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not one this service gave for this reader, box and content.
    Invalid,
    /// Given, but longer ago than a reference lives.
    Expired,
}

/// Checks `reference` for `owner_id`'s box `box_id` of content `file_id` at `now`.
pub fn check(
    owner_id: i64,
    box_id: i64,
    file_id: i64,
    reference: &[u8],
    now: i64,
) -> Result<(), Refused> {
    if reference.len() != 8 + MAC_BYTES {
        return Err(Refused::Invalid);
    }
    let (issued, given) = reference.split_at(8);
    let mut at = [0u8; 8];
    at.copy_from_slice(issued);
    let issued = i64::from_be_bytes(at);
    // Compared whole, in constant time over the MAC's bytes.
    let expected = mac(owner_id, box_id, file_id, issued);
    let differs = expected
        .iter()
        .zip(given)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    if differs != 0 || issued > now + CLOCK_SKEW_SECONDS {
        return Err(Refused::Invalid);
    }
    let (_, ttl) = settings();
    if now - issued > ttl {
        return Err(Refused::Expired);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_the_rfc_4231_vector() {
        // Test case 2 of RFC 4231.
        let mac = hmac(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_reference_opens_only_its_own_box_and_content_until_it_expires() {
        let now = 1_000_000;
        let r = make(1, 5, 9, now);
        assert_eq!(check(1, 5, 9, &r, now + 10), Ok(()));
        // (owner, box, content, reference, at) -> outcome
        type Case = ((i64, i64, i64, Vec<u8>, i64), Result<(), Refused>);
        let cases: [Case; 7] = [
            ((2, 5, 9, r.clone(), now), Err(Refused::Invalid)),
            ((1, 6, 9, r.clone(), now), Err(Refused::Invalid)),
            ((1, 5, 8, r.clone(), now), Err(Refused::Invalid)),
            ((1, 5, 9, r[..20].to_vec(), now), Err(Refused::Invalid)),
            (
                (1, 5, 9, make(1, 5, 9, now + 3600), now),
                Err(Refused::Invalid),
            ),
            (
                (1, 5, 9, r.clone(), now + DEFAULT_TTL_SECONDS + 1),
                Err(Refused::Expired),
            ),
            ((1, 5, 9, r.clone(), now + DEFAULT_TTL_SECONDS), Ok(())),
        ];
        for ((owner, box_id, file, reference, at), expected) in cases {
            assert_eq!(
                check(owner, box_id, file, &reference, at),
                expected,
                "owner {owner}, box {box_id}, file {file}, at {at}"
            );
        }
        // A reference re-dated by its holder no longer matches its MAC.
        let mut forged = r.clone();
        forged[..8].copy_from_slice(&(now + 7000).to_be_bytes());
        assert_eq!(check(1, 5, 9, &forged, now + 7100), Err(Refused::Invalid));
    }
}
