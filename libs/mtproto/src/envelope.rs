//! The envelope around every MTProto message: unencrypted (auth key creation) or MTProto 2.0
//! encrypted (`auth_key_id`, `msg_key`, AES-256-IGE of salt, session, msg_id, seq_no, body and
//! 12–1024 bytes of padding).

use rand::{Rng, RngCore};

use crate::crypto::{AuthKey, Direction, ige_decrypt, ige_encrypt, message_aes, msg_key};

/// Why a frame is not a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("message too short")]
    TooShort,
    #[error("encrypted part is not a multiple of 16 bytes")]
    Unaligned,
    #[error("msg_key does not match the decrypted message")]
    BadMsgKey,
    #[error("message length field is not valid")]
    BadLength,
    #[error("padding is not 12 to 1024 bytes")]
    BadPadding,
}

/// What a frame starts with: the key it is encrypted with (0 = unencrypted).
pub fn auth_key_id(frame: &[u8]) -> Option<i64> {
    Some(i64::from_le_bytes(frame.get(..8)?.try_into().ok()?))
}

/// An unencrypted message (auth key creation only).
#[derive(Debug, PartialEq, Eq)]
pub struct Plain {
    pub msg_id: i64,
    pub body: Vec<u8>,
}

impl Plain {
    pub fn decode(frame: &[u8]) -> Result<Plain, EnvelopeError> {
        if frame.len() < 20 {
            return Err(EnvelopeError::TooShort);
        }
        let msg_id = i64::from_le_bytes(array(&frame[8..16]));
        let length = u32::from_le_bytes(array(&frame[16..20])) as usize;
        let body = frame.get(20..20 + length).ok_or(EnvelopeError::BadLength)?;
        Ok(Plain {
            msg_id,
            body: body.to_vec(),
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.body.len());
        out.extend_from_slice(&0i64.to_le_bytes());
        out.extend_from_slice(&self.msg_id.to_le_bytes());
        out.extend_from_slice(&(self.body.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.body);
        out
    }
}

/// A decrypted MTProto 2.0 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub salt: i64,
    pub session_id: i64,
    pub msg_id: i64,
    pub seq_no: i32,
    pub body: Vec<u8>,
}

impl Message {
    /// Decrypts a frame sent in `direction` under `key` and checks it as MTProto 2.0 requires.
    pub fn decrypt(
        key: &AuthKey,
        direction: Direction,
        frame: &[u8],
    ) -> Result<Message, EnvelopeError> {
        if frame.len() < 24 + 32 + 16 {
            return Err(EnvelopeError::TooShort);
        }
        if !(frame.len() - 24).is_multiple_of(16) {
            return Err(EnvelopeError::Unaligned);
        }
        let sent_key: [u8; 16] = array(&frame[8..24]);
        let (aes_key, aes_iv) = message_aes(key, direction, &sent_key);
        let mut plain = frame[24..].to_vec();
        ige_decrypt(&mut plain, &aes_key, &aes_iv);
        if msg_key(key, direction, &plain) != sent_key {
            return Err(EnvelopeError::BadMsgKey);
        }
        let length = u32::from_le_bytes(array(&plain[28..32])) as usize;
        if !length.is_multiple_of(4) || 32 + length > plain.len() {
            return Err(EnvelopeError::BadLength);
        }
        let padding = plain.len() - 32 - length;
        if !(12..=1024).contains(&padding) {
            return Err(EnvelopeError::BadPadding);
        }
        Ok(Message {
            salt: i64::from_le_bytes(array(&plain[0..8])),
            session_id: i64::from_le_bytes(array(&plain[8..16])),
            msg_id: i64::from_le_bytes(array(&plain[16..24])),
            seq_no: i32::from_le_bytes(array(&plain[24..28])),
            body: plain[32..32 + length].to_vec(),
        })
    }

    /// Encrypts the message for `direction` under `key`.
    pub fn encrypt(&self, key: &AuthKey, direction: Direction) -> Vec<u8> {
        let mut rng = rand::rng();
        let unpadded = 32 + self.body.len();
        let mut padding = 16 - unpadded % 16;
        if padding < 12 {
            padding += 16;
        }
        padding += 16 * rng.random_range(0..4usize);
        let mut plain = Vec::with_capacity(unpadded + padding);
        plain.extend_from_slice(&self.salt.to_le_bytes());
        plain.extend_from_slice(&self.session_id.to_le_bytes());
        plain.extend_from_slice(&self.msg_id.to_le_bytes());
        plain.extend_from_slice(&self.seq_no.to_le_bytes());
        plain.extend_from_slice(&(self.body.len() as u32).to_le_bytes());
        plain.extend_from_slice(&self.body);
        let start = plain.len();
        plain.resize(start + padding, 0);
        rng.fill_bytes(&mut plain[start..]);
        let key_of_message = msg_key(key, direction, &plain);
        let (aes_key, aes_iv) = message_aes(key, direction, &key_of_message);
        ige_encrypt(&mut plain, &aes_key, &aes_iv);
        let mut frame = Vec::with_capacity(24 + plain.len());
        frame.extend_from_slice(&key.id().to_le_bytes());
        frame.extend_from_slice(&key_of_message);
        frame.extend_from_slice(&plain);
        frame
    }
}

/// The first `N` bytes of `bytes` as an array; callers have checked the length.
pub(crate) fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_tampering_is_caught() {
        let key = AuthKey::from_bytes(std::array::from_fn(|i| (i * 31 % 251) as u8));
        let message = Message {
            salt: 1,
            session_id: 2,
            msg_id: 3 << 32,
            seq_no: 1,
            body: vec![9; 44],
        };
        let mut frame = message.encrypt(&key, Direction::ServerToClient);
        assert_eq!(auth_key_id(&frame), Some(key.id()));
        assert_eq!(
            Message::decrypt(&key, Direction::ServerToClient, &frame),
            Ok(message)
        );
        assert_eq!(
            Message::decrypt(&key, Direction::ClientToServer, &frame),
            Err(EnvelopeError::BadMsgKey)
        );
        let last = frame.len() - 1;
        frame[last] ^= 0x40;
        assert_eq!(
            Message::decrypt(&key, Direction::ServerToClient, &frame),
            Err(EnvelopeError::BadMsgKey)
        );
        assert_eq!(
            Message::decrypt(&key, Direction::ServerToClient, &frame[..30]),
            Err(EnvelopeError::TooShort)
        );
    }

    #[test]
    fn plain_messages_round_trip() {
        let plain = Plain {
            msg_id: 77,
            body: vec![1, 2, 3, 4],
        };
        assert_eq!(Plain::decode(&plain.encode()), Ok(plain));
        assert_eq!(Plain::decode(&[0; 19]), Err(EnvelopeError::TooShort));
    }
}
