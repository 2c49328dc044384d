//! The codec of the client API's servers (the generated `*_server` modules of `api::v1` use
//! it; see `build.rs`). It reads and writes prost's wire format like `tonic_prost`'s codec,
//! but a request body that does not decode answers `INVALID_ARGUMENT` with the stable code
//! `INPUT_REQUEST_INVALID`, where prost's codec answers a bare `INTERNAL`: a malformed body
//! is the client's fault, and clients match on the code, never on the prose. Its answers
//! start from a small buffer (see [`ANSWER_BUFFER`]).

use std::marker::PhantomData;

use oxigram_errors::{ErrorCode, status};
use prost::Message;
use tonic::{
    Status,
    codec::{BufferSettings, Codec, DecodeBuf, Decoder},
};
use tonic_prost::ProstEncoder;

/// How every method of the client API's paths begins: `/oxigram.api.v1.<Service>/<Method>`.
pub const CLIENT_API_PATH_PREFIX: &str = "/oxigram.api.v1.";

/// The status of a request that cannot be read: `INVALID_ARGUMENT`, `INPUT_REQUEST_INVALID`.
pub fn request_invalid(detail: &str) -> Status {
    status(ErrorCode::InputRequestInvalid, detail)
}

/// The buffer an answer's body starts from, and the bytes it gathers before handing them on.
/// tonic allocates the buffer when the answer starts and keeps it for as long as the answer
/// lasts, so an update stream, open and idle for hours, holds it all that time: ten thousand
/// streams of tonic's default (8 KiB) would hold 80 MiB of empty buffers. Most answers are
/// far smaller than a kilobyte; a bigger one grows the buffer as it is encoded.
pub const ANSWER_BUFFER: (usize, usize) = (512, 32 * 1024);

/// Encodes answers `T`, decodes requests `U`.
#[derive(Debug, Clone)]
pub struct ClientApiCodec<T, U> {
    _pd: PhantomData<(T, U)>,
}

impl<T, U> Default for ClientApiCodec<T, U> {
    fn default() -> Self {
        Self { _pd: PhantomData }
    }
}

impl<T, U> Codec for ClientApiCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = RequestDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        let (buffer_size, yield_threshold) = ANSWER_BUFFER;
        ProstEncoder::new(BufferSettings::new(buffer_size, yield_threshold))
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder { _pd: PhantomData }
    }
}

/// Decodes one request message; see the module's documentation.
#[derive(Debug, Clone)]
pub struct RequestDecoder<U> {
    _pd: PhantomData<U>,
}

impl<U: Message + Default> Decoder for RequestDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf)
            .map(Some)
            .map_err(|err| request_invalid(&err.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures::StreamExt;
    use http_body_util::Full;
    use oxigram_errors::code_of;
    use tonic::{Code, codec::Streaming};

    use super::*;
    use crate::{
        api::v1::{CreateAuthKeyRequest, SendMessageRequest},
        types::v1::InputPeer,
    };

    /// Decodes `message` (framed as one uncompressed gRPC message) as the server does.
    async fn decode<U: Message + Default + Send + 'static>(message: &[u8]) -> Result<U, Status> {
        let mut frame = vec![0u8];
        frame.extend_from_slice(
            &u32::try_from(message.len())
                .unwrap_or(u32::MAX)
                .to_be_bytes(),
        );
        frame.extend_from_slice(message);
        let decoder = ClientApiCodec::<(), U>::default().decoder();
        let mut stream = Streaming::new_request(decoder, Full::new(Bytes::from(frame)), None, None);
        match stream.next().await {
            Some(decoded) => decoded,
            None => Err(Status::internal("no message")),
        }
    }

    fn assert_refused(case: &str, decoded: Result<impl std::fmt::Debug, Status>) {
        let refused = match decoded {
            Ok(message) => panic!("{case}: decoded as {message:?}"),
            Err(status) => status,
        };
        assert_eq!(refused.code(), Code::InvalidArgument, "{case}: {refused:?}");
        assert_eq!(
            code_of(&refused).as_deref(),
            Some("INPUT_REQUEST_INVALID"),
            "{case}: {refused:?}"
        );
    }

    #[tokio::test]
    async fn malformed_bodies_are_invalid_arguments_with_a_stable_code() {
        // SendMessageRequest: random_id = 2 (int64), text = 3 (string).
        let cases: &[(&str, &[u8])] = &[
            (
                "bad varint (eleven bytes)",
                &[
                    0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                ],
            ),
            (
                "truncated length-delimited field",
                &[0x1a, 0x05, b'h', b'i'],
            ),
            ("wrong wire type for a known field", &[0x18, 0x01]),
            ("invalid UTF-8 in a string field", &[0x1a, 0x02, 0xc3, 0x28]),
            ("field number 0", &[0x02, 0x00]),
            (
                "random bytes",
                &[0x9c, 0x3e, 0x71, 0xd4, 0x0f, 0xa8, 0x56, 0xe2, 0x1b, 0xc7],
            ),
        ];
        for (case, body) in cases {
            assert_refused(case, decode::<SendMessageRequest>(body).await);
        }
        // A message of one string field, whose field 1 is length-delimited.
        assert_refused(
            "varint for a string field",
            decode::<CreateAuthKeyRequest>(&[0x08, 0x01]).await,
        );
    }

    #[tokio::test]
    async fn well_formed_bodies_still_decode() -> Result<(), Status> {
        let sent = SendMessageRequest {
            peer: Some(InputPeer::user(7)),
            text: "hello".into(),
            ..Default::default()
        };
        assert_eq!(
            decode::<SendMessageRequest>(&sent.encode_to_vec()).await?,
            sent
        );
        // Unknown fields are skipped, as prost always did.
        let with_unknown = [0xf8, 0x01, 0x05];
        assert_eq!(
            decode::<SendMessageRequest>(&with_unknown).await?,
            SendMessageRequest::default()
        );
        Ok(())
    }
}
