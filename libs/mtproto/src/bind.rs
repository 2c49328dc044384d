//! `auth.bindTempAuthKey`'s binding message (perfect forward secrecy): a `bind_auth_key_inner`
//! sent inside the call, encrypted with the *permanent* key under MTProto 1.0, which proves that
//! the client calling over a temporary key also holds the permanent one. The client builds it
//! with [`encrypt`]; the server opens it with [`decrypt`] and checks what it says against the
//! call ([`crate::session::Session::check_bind`]).
//!
//! The message is `perm_auth_key_id (8) + msg_key (16) + AES-256-IGE(plaintext + padding)`,
//! where the plaintext is `random (16) + msg_id (8) + seq_no (4) + length (4) + inner`, the
//! padding makes it a multiple of 16 bytes (0 to 15 bytes), `msg_key` is bits 32..160 of the
//! SHA-1 of the plaintext without its padding, and the AES key and IV come from MTProto 1.0's
//! derivation ([`crate::crypto::message_aes_v1`]).

use oxigram_tl::{Cursor, Deserializable, Identifiable, types};
use rand::RngCore;

use crate::crypto::{AuthKey, Direction, ige_decrypt, ige_encrypt, message_aes_v1, msg_key_v1};
use crate::envelope::array;
use crate::handshake::boxed;

/// Why a binding message was refused (the caller answers `ENCRYPTED_MESSAGE_INVALID` to all).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    #[error("binding message too short")]
    TooShort,
    #[error("binding message is not a multiple of 16 bytes")]
    Unaligned,
    #[error("binding message is encrypted with another key")]
    OtherKey,
    #[error("binding message length field is not valid")]
    BadLength,
    #[error("msg_key does not match the decrypted binding message")]
    BadMsgKey,
    #[error("binding message does not hold a bind_auth_key_inner")]
    NotBinding,
}

/// What an opened binding message says.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    pub msg_id: i64,
    pub seq_no: i32,
    pub inner: types::BindAuthKeyInner,
}

/// Plaintext header: random (16), msg_id (8), seq_no (4), length (4).
const HEADER: usize = 32;

/// The `encrypted_message` of a bind call sent as `msg_id`, `inner` encrypted with `perm`.
pub fn encrypt(
    perm: &AuthKey,
    msg_id: i64,
    seq_no: i32,
    inner: &types::BindAuthKeyInner,
) -> Vec<u8> {
    let mut rng = rand::rng();
    let mut random = [0u8; 16];
    rng.fill_bytes(&mut random);
    let body = boxed(inner);
    let mut padding = vec![0u8; (16 - (HEADER + body.len()) % 16) % 16];
    rng.fill_bytes(&mut padding);
    encrypt_with(perm, &random, msg_id, seq_no, &body, &padding)
}

/// [`encrypt`] with the random parts given (tests compare it with fixed vectors).
fn encrypt_with(
    perm: &AuthKey,
    random: &[u8; 16],
    msg_id: i64,
    seq_no: i32,
    body: &[u8],
    padding: &[u8],
) -> Vec<u8> {
    let mut plain = Vec::with_capacity(HEADER + body.len() + padding.len());
    plain.extend_from_slice(random);
    plain.extend_from_slice(&msg_id.to_le_bytes());
    plain.extend_from_slice(&seq_no.to_le_bytes());
    plain.extend_from_slice(&(body.len() as u32).to_le_bytes());
    plain.extend_from_slice(body);
    let msg_key = msg_key_v1(&plain);
    plain.extend_from_slice(padding);
    let (aes_key, aes_iv) = message_aes_v1(perm, Direction::ClientToServer, &msg_key);
    ige_encrypt(&mut plain, &aes_key, &aes_iv);
    let mut out = Vec::with_capacity(24 + plain.len());
    out.extend_from_slice(&perm.id().to_le_bytes());
    out.extend_from_slice(&msg_key);
    out.extend_from_slice(&plain);
    out
}

/// Opens a binding message with the permanent key `perm` and checks its envelope: the key id,
/// the length, the padding (under 16 bytes) and the message key.
pub fn decrypt(perm: &AuthKey, encrypted: &[u8]) -> Result<Opened, BindError> {
    if encrypted.len() < 24 + HEADER {
        return Err(BindError::TooShort);
    }
    if !(encrypted.len() - 24).is_multiple_of(16) {
        return Err(BindError::Unaligned);
    }
    if encrypted[..8] != perm.id().to_le_bytes() {
        return Err(BindError::OtherKey);
    }
    let msg_key: [u8; 16] = array(&encrypted[8..24]);
    let (aes_key, aes_iv) = message_aes_v1(perm, Direction::ClientToServer, &msg_key);
    let mut plain = encrypted[24..].to_vec();
    ige_decrypt(&mut plain, &aes_key, &aes_iv);
    let length = u32::from_le_bytes(array(&plain[28..32])) as usize;
    let end = HEADER
        .checked_add(length)
        .filter(|end| *end <= plain.len() && plain.len() - *end < 16)
        .ok_or(BindError::BadLength)?;
    if msg_key_v1(&plain[..end]) != msg_key {
        return Err(BindError::BadMsgKey);
    }
    let mut cursor = Cursor::from_slice(&plain[HEADER..end]);
    if u32::deserialize(&mut cursor) != Ok(types::BindAuthKeyInner::CONSTRUCTOR_ID) {
        return Err(BindError::NotBinding);
    }
    let inner =
        types::BindAuthKeyInner::deserialize(&mut cursor).map_err(|_| BindError::NotBinding)?;
    Ok(Opened {
        msg_id: i64::from_le_bytes(array(&plain[16..24])),
        seq_no: i32::from_le_bytes(array(&plain[24..28])),
        inner,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Message;

    fn perm() -> AuthKey {
        AuthKey::from_bytes(std::array::from_fn(|j| ((j * 13 + 5) % 256) as u8))
    }

    fn inner(perm_auth_key_id: i64) -> types::BindAuthKeyInner {
        types::BindAuthKeyInner {
            nonce: 0x1122_3344_5566_7788,
            temp_auth_key_id: 111,
            perm_auth_key_id,
            temp_session_id: 222,
            expires_at: 1_700_000_000,
        }
    }

    /// The same message built by an independent implementation of MTProto 1.0 (SHA-1 from
    /// hashlib, AES-IGE as a loop over AES-ECB, computed outside this crate).
    const INDEPENDENT: &str = "fc4eaf55f743da3f755f7f2b41452b8793017e1af2eddb1c4adb7429a4d9ba02\
        228217fe15c88da27d07532f89382f8a24e6d067d2e83d14df03fd3c678fe3ade48628cfd25324ceb7c3ab\
        b90f66f4b8988b8734f5449d4be7ccf1bc9ffc7ce1ebc555078bd0a144";

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn matches_an_independent_implementation_and_opens() {
        let perm = perm();
        let random: [u8; 16] = std::array::from_fn(|i| i as u8);
        let padding: Vec<u8> = (0..8).map(|j| 0xa0 + j).collect();
        let msg_id = 1_700_000_000i64 << 32;
        let built = encrypt_with(
            &perm,
            &random,
            msg_id,
            0,
            &boxed(&inner(perm.id())),
            &padding,
        );
        assert_eq!(hex(&built), INDEPENDENT.replace(' ', ""));
        assert_eq!(
            decrypt(&perm, &built),
            Ok(Opened {
                msg_id,
                seq_no: 0,
                inner: inner(perm.id())
            })
        );
        // With random parts it still opens.
        let random_parts = encrypt(&perm, msg_id + 4, 0, &inner(perm.id()));
        assert_eq!(
            decrypt(&perm, &random_parts).map(|o| o.msg_id),
            Ok(msg_id + 4)
        );
    }

    #[test]
    fn anything_else_is_refused() {
        let perm = perm();
        let other = AuthKey::from_bytes([9; 256]);
        let msg_id = 1_700_000_000i64 << 32;
        let good = encrypt(&perm, msg_id, 0, &inner(perm.id()));
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let mut renamed = encrypt(&other, msg_id, 0, &inner(perm.id()));
        renamed[..8].copy_from_slice(&perm.id().to_le_bytes());
        // MTProto 2.0 under the right key: what the server wrongly accepted before.
        let v2 = Message {
            salt: 1,
            session_id: 2,
            msg_id,
            seq_no: 0,
            body: boxed(&inner(perm.id())),
        }
        .encrypt(&perm, Direction::ClientToServer);
        let not_inner = encrypt_with(&perm, &[0; 16], msg_id, 0, &[1, 2, 3, 4], &[0; 12]);
        let cases: [(&str, Vec<u8>, BindError); 7] = [
            ("empty", Vec::new(), BindError::TooShort),
            (
                "unaligned",
                good[..good.len() - 1].to_vec(),
                BindError::Unaligned,
            ),
            (
                "another key",
                encrypt(&other, msg_id, 0, &inner(perm.id())),
                BindError::OtherKey,
            ),
            ("a ciphertext byte changed", flipped, BindError::BadMsgKey),
            ("another key's ciphertext", renamed, BindError::BadLength),
            ("MTProto 2.0", v2, BindError::BadLength),
            ("not bind_auth_key_inner", not_inner, BindError::NotBinding),
        ];
        for (name, bytes, error) in cases {
            let got = decrypt(&perm, &bytes);
            // A wrong key or 2.0 envelope decrypts to noise: its length field is noise too, and
            // in the rare case it is plausible the message key catches it.
            let expected_or_key = got == Err(error.clone())
                || (error == BindError::BadLength && got == Err(BindError::BadMsgKey));
            assert!(expected_or_key, "{name}: {got:?}");
        }
    }
}
