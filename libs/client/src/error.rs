//! What can go wrong talking to the gateway, each case with a stable code for counting and
//! matching.

use tonic::Status;

/// An error of a call, or of the rules a client applies to the answers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The gateway answered with an error status; [`Error::code`] is its stable code.
    #[error("{}", describe(.0))]
    Status(#[from] Status),
    /// No answer within the client's deadline.
    #[error("no answer within the deadline")]
    Timeout,
    /// The gateway's address is not a URI.
    #[error("not a gateway address: {0}")]
    BadAddress(String),
    /// No connection could be made to the gateway.
    #[error("cannot reach the gateway at {address}: {source}")]
    Unreachable {
        address: String,
        #[source]
        source: tonic::transport::Error,
    },
    /// An auth key that cannot travel in a header (`<id>:<secret hex>`).
    #[error("an auth key is `<id>:<secret hex>`")]
    BadAuthKey,
    /// The answer lacks a field the protocol promises.
    #[error("the answer has no {0}")]
    Missing(&'static str),
    /// The gateway closed the update stream.
    #[error("the update stream ended")]
    StreamEnded,
    /// The local pts is older than what the log retains: reload dialogs and history, then
    /// continue from `pts`.
    #[error("the difference is too long: reload dialogs and history, then continue from pts {pts}")]
    DifferenceTooLong { pts: i32 },
    /// A difference said more was coming but did not move past `pts`; following it would
    /// never end.
    #[error("a difference slice did not move past pts {pts}")]
    DifferenceStalled { pts: i32 },
}

fn describe(status: &Status) -> String {
    match oxigram_errors::code_of(status) {
        // The gateway's message already starts with its code.
        Some(_) => status.message().to_owned(),
        None => format!("gRPC {:?}: {}", status.code(), status.message()),
    }
}

impl Error {
    /// The wait a `FLOOD_WAIT_X` asks for: the gateway (or a service behind it) is pacing
    /// this device, which comes back after it rather than treating the refusal as a failure.
    pub fn flood_wait(&self) -> Option<std::time::Duration> {
        let Self::Status(status) = self else {
            return None;
        };
        let seconds = oxigram_errors::code_of(status)?
            .strip_prefix("FLOOD_WAIT_")?
            .parse()
            .ok()?;
        Some(std::time::Duration::from_secs(seconds))
    }

    /// A stable code: the gateway's error code (`PEER_ID_INVALID`, …), `GRPC_<code>` for a
    /// status without one, or this client's own (`TIMEOUT`, `ENDED`, `CONNECTION_LOST`: the
    /// connection broke mid-call, `NO_<FIELD>`, …).
    pub fn code(&self) -> String {
        match self {
            Self::Status(s) => oxigram_errors::code_of(s).unwrap_or_else(|| {
                // A status the transport made (it carries the error that broke the call; one
                // from the wire never does): the connection went mid-call, outcome unknown,
                // as with SERVICE_UNAVAILABLE; a send retried with its random_id is stored
                // once.
                if s.code() == tonic::Code::Unknown && std::error::Error::source(s).is_some() {
                    "CONNECTION_LOST".into()
                } else {
                    format!("GRPC_{:?}", s.code())
                }
            }),
            Self::Timeout => "TIMEOUT".into(),
            Self::BadAddress(_) => "BAD_ADDRESS".into(),
            Self::Unreachable { .. } => "UNREACHABLE".into(),
            Self::BadAuthKey => "BAD_AUTH_KEY".into(),
            Self::Missing(field) => format!("NO_{}", field.to_ascii_uppercase()),
            Self::StreamEnded => "ENDED".into(),
            Self::DifferenceTooLong { .. } => "DIFFERENCE_TOO_LONG".into(),
            Self::DifferenceStalled { .. } => "DIFFERENCE_STALLED".into(),
        }
    }
}

/// For callers that speak in statuses: the gateway's status itself, or the closest gRPC code.
impl From<Error> for Status {
    fn from(error: Error) -> Self {
        match error {
            Error::Status(s) => s,
            Error::Timeout => Status::deadline_exceeded(error.to_string()),
            Error::Unreachable { .. } | Error::StreamEnded => {
                Status::unavailable(error.to_string())
            }
            Error::BadAddress(_) | Error::BadAuthKey => Status::invalid_argument(error.to_string()),
            Error::Missing(_)
            | Error::DifferenceTooLong { .. }
            | Error::DifferenceStalled { .. } => Status::unknown(error.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use oxigram_errors::{Error as ApiError, ErrorCode};

    use super::*;

    #[test]
    fn codes() {
        let cases: Vec<(Error, &str)> = vec![
            (
                Status::from(ApiError::new(ErrorCode::PeerIdInvalid, "no such user")).into(),
                "PEER_ID_INVALID",
            ),
            (Status::unavailable("gone").into(), "GRPC_Unavailable"),
            (Status::unknown("from the wire").into(), "GRPC_Unknown"),
            (
                Status::from_error(Box::new(std::io::Error::other("connection reset"))).into(),
                "CONNECTION_LOST",
            ),
            (Error::Timeout, "TIMEOUT"),
            (Error::Missing("state"), "NO_STATE"),
            (Error::StreamEnded, "ENDED"),
            (Error::DifferenceTooLong { pts: 3 }, "DIFFERENCE_TOO_LONG"),
            (Error::DifferenceStalled { pts: 3 }, "DIFFERENCE_STALLED"),
        ];
        for (error, code) in cases {
            assert_eq!(error.code(), code, "{error}");
        }
    }

    #[test]
    fn a_gateway_status_survives_the_round_trip() {
        let status = Status::from(ApiError::new(ErrorCode::MessageEmpty, "empty"));
        let back = Status::from(Error::from(status));
        assert_eq!(
            oxigram_errors::code_of(&back).as_deref(),
            Some("MESSAGE_EMPTY")
        );
        assert_eq!(
            Status::from(Error::Timeout).code(),
            tonic::Code::DeadlineExceeded
        );
    }
}
