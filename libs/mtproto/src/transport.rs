//! MTProto's TCP transports: abridged, intermediate, padded intermediate and full, each
//! optionally wrapped in obfuscated2 (AES-256-CTR keyed by the connection's first 64 bytes).
//!
//! A server learns the transport from the connection's first bytes ([`Framing::detect`]); a
//! client picks one ([`Framing::client`]). Both then cut the byte stream into frames with
//! [`Framing::decode`] and write frames with [`Framing::encode`]. Every malformed input is a
//! [`FrameError`]: the caller closes that one connection.

use aes::Aes256;
use ctr::cipher::{KeyIvInit, StreamCipher};
use rand::{Rng, RngCore};

type Ctr = ctr::Ctr128BE<Aes256>;

/// The largest frame either side accepts: a 512 KiB upload part, or a 1 MiB download chunk
/// (`upload.getFile`'s largest), plus its envelope.
pub const MAX_FRAME: usize = (1 << 20) + (1 << 16);

const ABRIDGED_TAG: u8 = 0xef;
const INTERMEDIATE_TAG: [u8; 4] = [0xee; 4];
const PADDED_TAG: [u8; 4] = [0xdd; 4];
const OBFUSCATED_HEADER: usize = 64;

/// How frames are delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Abridged,
    Intermediate,
    PaddedIntermediate,
    Full,
}

impl Kind {
    fn tag(self) -> [u8; 4] {
        match self {
            Kind::Abridged => [ABRIDGED_TAG; 4],
            Kind::Intermediate => INTERMEDIATE_TAG,
            Kind::PaddedIntermediate => PADDED_TAG,
            Kind::Full => [0; 4],
        }
    }
}

/// Why a byte stream cannot be framed; the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes is larger than allowed")]
    TooLarge(usize),
    #[error("frame length {0} is not valid for this transport")]
    BadLength(usize),
    #[error("full transport: sequence number {got}, expected {expected}")]
    BadSequence { expected: u32, got: u32 },
    #[error("full transport: checksum mismatch")]
    BadChecksum,
    #[error("obfuscated2 header names no known transport")]
    BadObfuscation,
}

/// The two AES-CTR streams of an obfuscated2 connection.
struct Obfuscation {
    read: Ctr,
    write: Ctr,
}

/// One connection's framing state.
pub struct Framing {
    kind: Kind,
    obfuscation: Option<Obfuscation>,
    /// Bytes already deobfuscated at the front of the caller's buffer.
    clear: usize,
    recv_seq: u32,
    send_seq: u32,
}

/// What the first bytes of a connection told the server.
pub enum Detected {
    /// More bytes are needed to tell.
    NeedMore,
    /// The transport, and how many header bytes to drop from the buffer.
    Framing(Box<Framing>, usize),
}

impl Framing {
    /// The server side: tells the transport from the connection's first bytes.
    pub fn detect(head: &[u8]) -> Result<Detected, FrameError> {
        let Some(&first) = head.first() else {
            return Ok(Detected::NeedMore);
        };
        if first == ABRIDGED_TAG {
            return Ok(Detected::Framing(Box::new(Self::plain(Kind::Abridged)), 1));
        }
        if head.len() < 8 {
            return Ok(Detected::NeedMore);
        }
        match [head[0], head[1], head[2], head[3]] {
            INTERMEDIATE_TAG => {
                return Ok(Detected::Framing(
                    Box::new(Self::plain(Kind::Intermediate)),
                    4,
                ));
            }
            PADDED_TAG => {
                return Ok(Detected::Framing(
                    Box::new(Self::plain(Kind::PaddedIntermediate)),
                    4,
                ));
            }
            _ => {}
        }
        // The full transport's first frame has sequence number 0; an obfuscated2 header never
        // has four zero bytes there (clients re-draw it until it has not).
        if head[4..8] == [0, 0, 0, 0] {
            return Ok(Detected::Framing(Box::new(Self::plain(Kind::Full)), 0));
        }
        if head.len() < OBFUSCATED_HEADER {
            return Ok(Detected::NeedMore);
        }
        let mut header = [0u8; OBFUSCATED_HEADER];
        header.copy_from_slice(&head[..OBFUSCATED_HEADER]);
        let (mut read, write) = obfuscation_ciphers(&header);
        let mut clear = header;
        read.apply_keystream(&mut clear);
        let kind = match [clear[56], clear[57], clear[58], clear[59]] {
            [ABRIDGED_TAG, ABRIDGED_TAG, ABRIDGED_TAG, ABRIDGED_TAG] => Kind::Abridged,
            INTERMEDIATE_TAG => Kind::Intermediate,
            PADDED_TAG => Kind::PaddedIntermediate,
            _ => return Err(FrameError::BadObfuscation),
        };
        let mut framing = Self::plain(kind);
        framing.obfuscation = Some(Obfuscation { read, write });
        Ok(Detected::Framing(Box::new(framing), OBFUSCATED_HEADER))
    }

    /// The client side: the framing and the bytes to send before the first frame.
    pub fn client(kind: Kind, obfuscated: bool) -> (Framing, Vec<u8>) {
        if !obfuscated {
            let prefix = match kind {
                Kind::Abridged => vec![ABRIDGED_TAG],
                Kind::Intermediate => INTERMEDIATE_TAG.to_vec(),
                Kind::PaddedIntermediate => PADDED_TAG.to_vec(),
                Kind::Full => Vec::new(),
            };
            return (Self::plain(kind), prefix);
        }
        let mut rng = rand::rng();
        let mut header = [0u8; OBFUSCATED_HEADER];
        loop {
            rng.fill_bytes(&mut header);
            let head = [header[0], header[1], header[2], header[3]];
            if header[0] != ABRIDGED_TAG
                && ![
                    *b"PVrG",
                    *b"GET ",
                    *b"POST",
                    *b"HEAD",
                    INTERMEDIATE_TAG,
                    PADDED_TAG,
                ]
                .contains(&head)
                && header[4..8] != [0, 0, 0, 0]
            {
                break;
            }
        }
        header[56..60].copy_from_slice(&kind.tag());
        let (mut write, read) = obfuscation_ciphers(&header);
        let mut encrypted = header;
        write.apply_keystream(&mut encrypted);
        header[56..64].copy_from_slice(&encrypted[56..64]);
        let mut framing = Self::plain(kind);
        framing.obfuscation = Some(Obfuscation { read, write });
        (framing, header.to_vec())
    }

    fn plain(kind: Kind) -> Framing {
        Framing {
            kind,
            obfuscation: None,
            clear: 0,
            recv_seq: 0,
            send_seq: 0,
        }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Takes one frame's payload off the front of `buf`, or `None` if it is not complete yet.
    /// `buf` holds raw bytes from the socket; obfuscated bytes are deciphered in place once.
    pub fn decode(&mut self, buf: &mut Vec<u8>) -> Result<Option<Vec<u8>>, FrameError> {
        if let Some(obfuscation) = &mut self.obfuscation {
            obfuscation.read.apply_keystream(&mut buf[self.clear..]);
        }
        self.clear = buf.len();
        let Some((header, length)) = self.frame_length(buf)? else {
            return Ok(None);
        };
        if length > MAX_FRAME {
            return Err(FrameError::TooLarge(length));
        }
        let total = header + length + if self.kind == Kind::Full { 4 } else { 0 };
        if buf.len() < total {
            return Ok(None);
        }
        let frame: Vec<u8> = buf.drain(..total).collect();
        self.clear -= total;
        let payload = match self.kind {
            Kind::Full => {
                let body_end = total - 4;
                let seq = u32_at(&frame, 4);
                if seq != self.recv_seq {
                    return Err(FrameError::BadSequence {
                        expected: self.recv_seq,
                        got: seq,
                    });
                }
                if crc32fast::hash(&frame[..body_end]).to_le_bytes() != frame[body_end..] {
                    return Err(FrameError::BadChecksum);
                }
                self.recv_seq = self.recv_seq.wrapping_add(1);
                frame[8..body_end].to_vec()
            }
            Kind::PaddedIntermediate => strip_padding(&frame[header..]),
            Kind::Abridged | Kind::Intermediate => frame[header..].to_vec(),
        };
        Ok(Some(payload))
    }

    /// The header length and payload length of the frame at the front of `buf`.
    fn frame_length(&self, buf: &[u8]) -> Result<Option<(usize, usize)>, FrameError> {
        match self.kind {
            Kind::Abridged => {
                let Some(&first) = buf.first() else {
                    return Ok(None);
                };
                // The top bit asks for a quick ack, which this server does not send.
                let words = first & 0x7f;
                if words < 0x7f {
                    return Ok(Some((1, usize::from(words) * 4)));
                }
                if buf.len() < 4 {
                    return Ok(None);
                }
                let words = u32::from_le_bytes([buf[1], buf[2], buf[3], 0]) as usize;
                Ok(Some((4, words * 4)))
            }
            Kind::Intermediate | Kind::PaddedIntermediate => {
                if buf.len() < 4 {
                    return Ok(None);
                }
                let length = (u32_at(buf, 0) & 0x7fff_ffff) as usize;
                if self.kind == Kind::Intermediate && !length.is_multiple_of(4) {
                    return Err(FrameError::BadLength(length));
                }
                Ok(Some((4, length)))
            }
            Kind::Full => {
                if buf.len() < 8 {
                    return Ok(None);
                }
                let length = u32_at(buf, 0) as usize;
                if length < 12 || !length.is_multiple_of(4) {
                    return Err(FrameError::BadLength(length));
                }
                Ok(Some((8, length - 12)))
            }
        }
    }

    /// Appends one frame carrying `payload` to `out`.
    pub fn encode(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        match self.kind {
            Kind::Abridged => {
                let words = payload.len() / 4;
                if words < 0x7f {
                    out.push(words as u8);
                } else {
                    out.push(0x7f);
                    out.extend_from_slice(&(words as u32).to_le_bytes()[..3]);
                }
                out.extend_from_slice(payload);
            }
            Kind::Intermediate => {
                out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
                out.extend_from_slice(payload);
            }
            Kind::PaddedIntermediate => {
                let mut rng = rand::rng();
                let padding = rng.random_range(0..16usize);
                out.extend_from_slice(&((payload.len() + padding) as u32).to_le_bytes());
                out.extend_from_slice(payload);
                let pad_start = out.len();
                out.resize(pad_start + padding, 0);
                rng.fill_bytes(&mut out[pad_start..]);
            }
            Kind::Full => {
                out.extend_from_slice(&((payload.len() + 12) as u32).to_le_bytes());
                out.extend_from_slice(&self.send_seq.to_le_bytes());
                out.extend_from_slice(payload);
                let crc = crc32fast::hash(&out[start..]);
                out.extend_from_slice(&crc.to_le_bytes());
                self.send_seq = self.send_seq.wrapping_add(1);
            }
        }
        if let Some(obfuscation) = &mut self.obfuscation {
            obfuscation.write.apply_keystream(&mut out[start..]);
        }
    }

    /// Ciphers bytes written outside [`Framing::encode`] (the client's header needs none).
    pub fn obfuscate(&mut self, bytes: &mut [u8]) {
        if let Some(obfuscation) = &mut self.obfuscation {
            obfuscation.write.apply_keystream(bytes);
        }
    }
}

/// The (first, second) AES-CTR streams an obfuscated2 header defines: the first is keyed by
/// bytes 8..56 as sent (client to server), the second by the same bytes reversed.
fn obfuscation_ciphers(header: &[u8; OBFUSCATED_HEADER]) -> (Ctr, Ctr) {
    let forward = &header[8..56];
    let mut reversed = [0u8; 48];
    reversed.copy_from_slice(forward);
    reversed.reverse();
    let first = Ctr::new(forward[..32].into(), forward[32..48].into());
    let second = Ctr::new(reversed[..32].into(), reversed[32..48].into());
    (first, second)
}

/// Padded intermediate frames end in 0–15 random bytes; the envelope says how long it is.
fn strip_padding(frame: &[u8]) -> Vec<u8> {
    if frame.len() < 8 {
        return frame.to_vec();
    }
    let unencrypted = frame[..8] == [0; 8];
    let length = if unencrypted {
        if frame.len() < 20 {
            frame.len()
        } else {
            20 + u32_at(frame, 16) as usize
        }
    } else if frame.len() >= 24 {
        24 + (frame.len() - 24) / 16 * 16
    } else {
        frame.len()
    };
    frame[..length.min(frame.len())].to_vec()
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(kind: Kind, obfuscated: bool) {
        let (mut client, prefix) = Framing::client(kind, obfuscated);
        let payloads: Vec<Vec<u8>> = [4usize, 8, 500, 508, 512, 4096, 70_000]
            .iter()
            .map(|&n| (0..n).map(|i| (i * 7 + 3) as u8).collect())
            .collect();
        let mut wire = prefix;
        for payload in &payloads {
            client.encode(payload, &mut wire);
        }
        let Ok(Detected::Framing(mut server, header)) = Framing::detect(&wire) else {
            panic!("{kind:?} not detected");
        };
        assert_eq!(server.kind(), kind);
        let mut buf = wire[header..].to_vec();
        // Feed it in slices to exercise partial frames.
        let mut fed = Vec::new();
        let mut got = Vec::new();
        for chunk in buf.chunks(333) {
            fed.extend_from_slice(chunk);
            while let Some(frame) = server.decode(&mut fed).unwrap_or_else(|e| panic!("{e}")) {
                got.push(frame);
            }
        }
        buf.clear();
        if kind == Kind::PaddedIntermediate {
            // Padding is stripped only where the envelope says how long it is.
            assert_eq!(got.len(), payloads.len());
        } else {
            assert_eq!(got, payloads, "{kind:?} obfuscated={obfuscated}");
        }
        // And back.
        let mut back = Vec::new();
        server.encode(&payloads[2], &mut back);
        let mut answer = back.clone();
        let frame = client.decode(&mut answer).unwrap_or_else(|e| panic!("{e}"));
        if kind != Kind::PaddedIntermediate {
            assert_eq!(frame.as_deref(), Some(&payloads[2][..]));
        }
    }

    #[test]
    fn every_transport_round_trips() {
        for kind in [
            Kind::Abridged,
            Kind::Intermediate,
            Kind::PaddedIntermediate,
            Kind::Full,
        ] {
            round_trip(kind, false);
            if kind != Kind::Full {
                round_trip(kind, true);
            }
        }
    }

    #[test]
    fn bad_frames_are_errors() {
        let (mut server, _) = Framing::client(Kind::Full, false);
        let mut frame = Vec::new();
        server.encode(&[1, 2, 3, 4], &mut frame);
        let last = frame.len() - 1;
        frame[last] ^= 1;
        let (mut reader, _) = Framing::client(Kind::Full, false);
        assert_eq!(reader.decode(&mut frame), Err(FrameError::BadChecksum));

        let (mut reader, _) = Framing::client(Kind::Intermediate, false);
        let mut huge = (u32::MAX >> 1).to_le_bytes().to_vec();
        assert!(matches!(
            reader.decode(&mut huge),
            Err(FrameError::BadLength(_)) | Err(FrameError::TooLarge(_))
        ));
    }
}
