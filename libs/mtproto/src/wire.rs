//! The service constructors the schema cannot express as plain types (their payload is any
//! object): `msg_container`, `gzip_packed` and `rpc_result`.

use std::io::{Read, Write};

use flate2::{Compression, read::GzDecoder, write::GzEncoder};
use oxigram_tl::{Cursor, Deserializable, Serializable};

pub const MSG_CONTAINER: u32 = 0x73f1_f8dc;
pub const GZIP_PACKED: u32 = 0x3072_cfa1;
pub const RPC_RESULT: u32 = 0xf35c_6d01;

/// The most a `gzip_packed` may inflate to; a larger one is refused, not allocated.
const MAX_INFLATED: u64 = 16 << 20;
/// The most messages one container may hold (Telegram's limit).
const MAX_CONTAINED: usize = 1020;

/// A message inside a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contained {
    pub msg_id: i64,
    pub seq_no: i32,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("malformed container")]
    Container,
    #[error("malformed gzip_packed")]
    Gzip,
}

/// The messages of a `msg_container` body (after its constructor id).
pub fn parse_container(body: &[u8]) -> Result<Vec<Contained>, WireError> {
    let mut at = 0usize;
    let count = read_u32(body, &mut at).ok_or(WireError::Container)? as usize;
    if count > MAX_CONTAINED {
        return Err(WireError::Container);
    }
    let mut messages = Vec::with_capacity(count);
    for _ in 0..count {
        let msg_id = read_u64(body, &mut at).ok_or(WireError::Container)? as i64;
        let seq_no = read_u32(body, &mut at).ok_or(WireError::Container)? as i32;
        let length = read_u32(body, &mut at).ok_or(WireError::Container)? as usize;
        let end = at.checked_add(length).ok_or(WireError::Container)?;
        if !length.is_multiple_of(4) {
            return Err(WireError::Container);
        }
        let inner = body.get(at..end).ok_or(WireError::Container)?;
        at = end;
        messages.push(Contained {
            msg_id,
            seq_no,
            body: inner.to_vec(),
        });
    }
    Ok(messages)
}

pub fn container(messages: &[Contained]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&MSG_CONTAINER.to_le_bytes());
    out.extend_from_slice(&(messages.len() as u32).to_le_bytes());
    for message in messages {
        out.extend_from_slice(&message.msg_id.to_le_bytes());
        out.extend_from_slice(&message.seq_no.to_le_bytes());
        out.extend_from_slice(&(message.body.len() as u32).to_le_bytes());
        out.extend_from_slice(&message.body);
    }
    out
}

/// The object a `gzip_packed` body (after its constructor id) holds.
pub fn gunzip(body: &[u8]) -> Result<Vec<u8>, WireError> {
    let packed =
        Vec::<u8>::deserialize(&mut Cursor::from_slice(body)).map_err(|_| WireError::Gzip)?;
    let mut inflated = Vec::new();
    GzDecoder::new(&packed[..])
        .take(MAX_INFLATED + 1)
        .read_to_end(&mut inflated)
        .map_err(|_| WireError::Gzip)?;
    if inflated.len() as u64 > MAX_INFLATED {
        return Err(WireError::Gzip);
    }
    Ok(inflated)
}

pub fn gzip(object: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(object);
    let packed = encoder.finish().unwrap_or_default();
    let mut out = GZIP_PACKED.to_le_bytes().to_vec();
    packed.serialize(&mut out);
    out
}

/// `rpc_result req_msg_id result`.
pub fn rpc_result(req_msg_id: i64, result: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + result.len());
    out.extend_from_slice(&RPC_RESULT.to_le_bytes());
    out.extend_from_slice(&req_msg_id.to_le_bytes());
    out.extend_from_slice(result);
    out
}

/// Splits an `rpc_result` body (after its constructor id) into `req_msg_id` and the result.
pub fn parse_rpc_result(body: &[u8]) -> Option<(i64, &[u8])> {
    let mut at = 0;
    let req = read_u64(body, &mut at)? as i64;
    Some((req, &body[at..]))
}

/// The rest of a buffer, unparsed: the `query:!X` of the invoke wrappers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail(pub Vec<u8>);

impl Serializable for Tail {
    fn serialize(&self, buf: &mut impl Extend<u8>) {
        buf.extend(self.0.iter().copied());
    }
}

impl Deserializable for Tail {
    fn deserialize(buf: oxigram_tl::deserialize::Buffer) -> oxigram_tl::deserialize::Result<Self> {
        let mut rest = Vec::new();
        buf.read_to_end(&mut rest)?;
        Ok(Tail(rest))
    }
}

fn read_u32(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let value = u32::from_le_bytes(bytes.get(*at..*at + 4)?.try_into().ok()?);
    *at += 4;
    Some(value)
}

fn read_u64(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let value = u64::from_le_bytes(bytes.get(*at..*at + 8)?.try_into().ok()?);
    *at += 8;
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_and_gzip_round_trip() {
        let messages = vec![
            Contained {
                msg_id: 4,
                seq_no: 1,
                body: vec![1, 2, 3, 4],
            },
            Contained {
                msg_id: 8,
                seq_no: 2,
                body: vec![],
            },
        ];
        let bytes = container(&messages);
        assert_eq!(parse_container(&bytes[4..]), Ok(messages));
        assert_eq!(
            parse_container(&bytes[4..bytes.len() - 4]),
            Err(WireError::Container)
        );

        let object: Vec<u8> = (0..5000u32).map(|i| (i % 7) as u8).collect();
        let packed = gzip(&object);
        assert_eq!(gunzip(&packed[4..]), Ok(object));
        assert_eq!(gunzip(&[1, 2, 3, 4]), Err(WireError::Gzip));
    }
}
