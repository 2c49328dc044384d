//! One error type for every service: a stable, Telegram-style error code plus a detail,
//! mapped to a gRPC status. The code travels in the status message (`CODE: detail`) and in
//! the `x-oxigram-error` metadata entry, so clients match on the code, never on prose.

use std::fmt;

use tonic::{Code, Status, metadata::MetadataValue};

/// The metadata entry that carries the stable error code.
pub const ERROR_CODE_HEADER: &str = "x-oxigram-error";

/// Stable error codes. Their strings never change once released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    PeerIdInvalid,
    MessageEmpty,
    MessageTooLong,
    MessageIdInvalid,
    /// reply_to names no message of the same private chat.
    ReplyMessageIdInvalid,
    /// The peer has not read the message yet.
    MessageNotReadYet,
    RandomIdInvalid,
    /// The same random_id was used before with a different message.
    RandomIdDuplicate,
    LimitInvalid,
    OffsetInvalid,
    PtsInvalid,
    /// The auth key is valid but signed in to no account: only the Auth service answers it.
    AuthKeyUnregistered,
    /// The auth key is malformed, unknown, or its secret is wrong.
    AuthKeyInvalid,
    PhoneNumberInvalid,
    PhoneCodeHashEmpty,
    PhoneCodeInvalid,
    PhoneCodeExpired,
    PhoneNumberUnoccupied,
    PhoneNumberOccupied,
    FirstnameInvalid,
    UserIdInvalid,
    /// An authorization to reset is not one of the caller's other devices.
    HashInvalid,
    FileIdInvalid,
    FilePartInvalid,
    FilePartTooBig,
    FilePartsInvalid,
    FilePartMissing,
    /// The request body is not a well-formed message of the method's request type (a bad
    /// varint, a truncated or misplaced field, field number 0, invalid UTF-8 in a string, a
    /// malformed gRPC frame): nothing of it was read.
    InputRequestInvalid,
    /// A text field holds U+0000 (NUL), which no text field accepts; the detail names the
    /// field. Postgres text cannot store NUL, so one rule refuses it everywhere alike.
    InputTextInvalid,
    /// Too many requests: retry after the given seconds.
    FloodWait(u32),
    /// A dependency did not answer in time; the request may be retried.
    Unavailable,
    Internal,
}

impl ErrorCode {
    /// The stable string of the code, e.g. `PEER_ID_INVALID` or `FLOOD_WAIT_30`.
    pub fn as_string(&self) -> String {
        let s = match self {
            Self::PeerIdInvalid => "PEER_ID_INVALID",
            Self::MessageEmpty => "MESSAGE_EMPTY",
            Self::MessageTooLong => "MESSAGE_TOO_LONG",
            Self::MessageIdInvalid => "MESSAGE_ID_INVALID",
            Self::ReplyMessageIdInvalid => "REPLY_MESSAGE_ID_INVALID",
            Self::MessageNotReadYet => "MESSAGE_NOT_READ_YET",
            Self::RandomIdInvalid => "RANDOM_ID_INVALID",
            Self::RandomIdDuplicate => "RANDOM_ID_DUPLICATE",
            Self::LimitInvalid => "LIMIT_INVALID",
            Self::OffsetInvalid => "OFFSET_INVALID",
            Self::PtsInvalid => "PERSISTENT_TIMESTAMP_INVALID",
            Self::AuthKeyUnregistered => "AUTH_KEY_UNREGISTERED",
            Self::AuthKeyInvalid => "AUTH_KEY_INVALID",
            Self::PhoneNumberInvalid => "PHONE_NUMBER_INVALID",
            Self::PhoneCodeHashEmpty => "PHONE_CODE_HASH_EMPTY",
            Self::PhoneCodeInvalid => "PHONE_CODE_INVALID",
            Self::PhoneCodeExpired => "PHONE_CODE_EXPIRED",
            Self::PhoneNumberUnoccupied => "PHONE_NUMBER_UNOCCUPIED",
            Self::PhoneNumberOccupied => "PHONE_NUMBER_OCCUPIED",
            Self::FirstnameInvalid => "FIRSTNAME_INVALID",
            Self::UserIdInvalid => "USER_ID_INVALID",
            Self::HashInvalid => "HASH_INVALID",
            Self::FileIdInvalid => "FILE_ID_INVALID",
            Self::FilePartInvalid => "FILE_PART_INVALID",
            Self::FilePartTooBig => "FILE_PART_TOO_BIG",
            Self::FilePartsInvalid => "FILE_PARTS_INVALID",
            Self::FilePartMissing => "FILE_PART_MISSING",
            Self::InputRequestInvalid => "INPUT_REQUEST_INVALID",
            Self::InputTextInvalid => "INPUT_TEXT_INVALID",
            Self::FloodWait(seconds) => return format!("FLOOD_WAIT_{seconds}"),
            Self::Unavailable => "SERVICE_UNAVAILABLE",
            Self::Internal => "INTERNAL",
        };
        s.to_owned()
    }

    fn grpc_code(&self) -> Code {
        match self {
            Self::AuthKeyUnregistered | Self::AuthKeyInvalid => Code::Unauthenticated,
            Self::FloodWait(_) => Code::ResourceExhausted,
            Self::RandomIdDuplicate | Self::PhoneNumberOccupied => Code::AlreadyExists,
            Self::PhoneNumberUnoccupied | Self::FilePartMissing | Self::MessageNotReadYet => {
                Code::FailedPrecondition
            }
            Self::Unavailable => Code::Unavailable,
            Self::Internal => Code::Internal,
            _ => Code::InvalidArgument,
        }
    }
}

/// An error with its stable code and a human-readable detail.
#[derive(Debug, Clone)]
pub struct Error {
    pub code: ErrorCode,
    pub detail: String,
}

impl Error {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: detail.into(),
        }
    }

    /// An internal failure: the detail is logged, the client sees only `INTERNAL`.
    pub fn internal(err: impl fmt::Display) -> Self {
        tracing::error!(error = %err, "internal error");
        Self::new(ErrorCode::Internal, "internal error")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_string(), self.detail)
    }
}

impl std::error::Error for Error {}

impl From<Error> for Status {
    fn from(err: Error) -> Self {
        let code = err.code.as_string();
        let mut status = Status::new(err.code.grpc_code(), format!("{code}: {}", err.detail));
        if let Ok(value) = MetadataValue::try_from(code.as_str()) {
            status.metadata_mut().insert(ERROR_CODE_HEADER, value);
        }
        status
    }
}

impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::PoolTimedOut => Self::new(ErrorCode::Unavailable, "database busy"),
            other => Self::internal(other),
        }
    }
}

/// Reads the stable code from a status made by [`Error`]; `None` for statuses from elsewhere.
pub fn code_of(status: &Status) -> Option<String> {
    status
        .metadata()
        .get(ERROR_CODE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Keeps a status from another service when it carries a stable code (it is meant for the
/// client); anything else becomes `SERVICE_UNAVAILABLE` or `INTERNAL`.
pub fn forward(status: Status) -> Status {
    if code_of(&status).is_some() {
        return status;
    }
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled => {
            Error::new(ErrorCode::Unavailable, status.message().to_owned()).into()
        }
        _ => Error::internal(format!("{}: {}", status.code(), status.message())).into(),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The status of a request refused with `code`.
pub fn status(code: ErrorCode, detail: &str) -> Status {
    Error::new(code, detail).into()
}

/// The one rule for a client's text, whatever the field: it must not hold U+0000 (NUL).
/// Postgres cannot store or compare NUL in text, so a text with it would fail as `INTERNAL`
/// wherever it reached a query; it is refused first, as `INPUT_TEXT_INVALID` naming `field`.
pub fn check_text(field: &str, value: &str) -> Result<(), Status> {
    if value.contains('\0') {
        return Err(status(
            ErrorCode::InputTextInvalid,
            &format!("{field} must not contain NUL (U+0000)"),
        ));
    }
    Ok(())
}

/// A page size: `default` for 0, `requested` when within `1..=max`, else `LIMIT_INVALID`.
pub fn page_limit(requested: i32, default: i32, max: i32) -> Result<i32, Status> {
    match requested {
        0 => Ok(default),
        l if (1..=max).contains(&l) => Ok(l),
        _ => Err(status(
            ErrorCode::LimitInvalid,
            &format!("limit must be within 1..={max}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_carries_the_stable_code() {
        let status: Status = Error::new(ErrorCode::FloodWait(30), "slow down").into();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(code_of(&status).as_deref(), Some("FLOOD_WAIT_30"));
        assert!(status.message().starts_with("FLOOD_WAIT_30: "));
    }

    #[test]
    fn page_limits() {
        assert_eq!(page_limit(0, 20, 100).ok(), Some(20));
        assert_eq!(page_limit(100, 20, 100).ok(), Some(100));
        let too_big = page_limit(101, 20, 100).err();
        assert_eq!(
            too_big.as_ref().and_then(code_of).as_deref(),
            Some("LIMIT_INVALID")
        );
        assert!(page_limit(-1, 20, 100).is_err());
    }

    #[test]
    fn text_with_nul_is_refused() {
        assert!(check_text("text", "hello").is_ok());
        assert!(check_text("text", "").is_ok());
        let refused = check_text("first_name", "Al\0ice").err();
        assert_eq!(
            refused.as_ref().map(Status::code),
            Some(Code::InvalidArgument)
        );
        assert_eq!(
            refused.as_ref().and_then(code_of).as_deref(),
            Some("INPUT_TEXT_INVALID")
        );
        assert!(refused.is_some_and(|s| s.message().contains("first_name")));
    }

    #[test]
    fn foreign_statuses_are_masked() {
        let forwarded = forward(Status::unavailable("connection refused"));
        assert_eq!(code_of(&forwarded).as_deref(), Some("SERVICE_UNAVAILABLE"));
        let kept = forward(Error::new(ErrorCode::PeerIdInvalid, "no such user").into());
        assert_eq!(code_of(&kept).as_deref(), Some("PEER_ID_INVALID"));
    }
}
