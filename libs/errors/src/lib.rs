//! One error type for every service: a stable, Telegram-style error code plus a detail,
//! mapped to a gRPC status. The code travels in the status message (`CODE: detail`) and in
//! the `x-oxigram-error` metadata entry, so clients match on the code, never on prose.

use std::fmt;

use tonic::{Code, Status, metadata::MetadataValue};

/// The metadata entry that carries the stable error code.
pub const ERROR_CODE_HEADER: &str = "x-oxigram-error";

/// The metadata entry of a `FILE_PART_MISSING` that names the first part of the upload not
/// saved: a client uploads that part again instead of the whole file.
pub const MISSING_PART_HEADER: &str = "x-oxigram-missing-part";

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
    /// Only a message's author may edit it.
    MessageAuthorRequired,
    /// A reaction that is not an emoji: longer than 16 code points, with a space or a control
    /// character, or plain ASCII.
    ReactionInvalid,
    /// An edit that changes nothing.
    MessageNotModified,
    /// The peer blocked the editor: her box of the message is left as it is.
    EditMessagesForbidden,
    /// More than 100 entities on one text.
    EntitiesTooLong,
    /// An entity's offset or length (UTF-16 code units) leaves its text, cuts a character in
    /// two, or its length is not positive.
    EntityBoundsInvalid,
    /// An entity of no known kind, or with a field its kind does not have.
    EntityKindInvalid,
    /// Two entities overlap partly, or one holds another its kind may not hold.
    EntityNestingInvalid,
    /// A text URL entity's url is not an http, https or tg URL.
    EntityUrlInvalid,
    /// A mention-by-id entity names no user id.
    EntityMentionUserInvalid,
    /// A pre entity's language is not a short name of letters, digits and `+#._-`.
    EntityLanguageInvalid,
    /// A reply quote that does not occur in the replied message's text (at quote_offset when
    /// given), or a quote without a reply.
    QuoteTextInvalid,
    /// A reply quote longer than 1024 characters.
    QuoteTextTooLong,
    /// A revoking delete would reach the box of a user who blocked the caller.
    DeleteMessagesForbidden,
    /// More message ids than one call may name (1000 for a delete).
    MessageIdsTooMany,
    RandomIdInvalid,
    /// A forward names no message ids.
    MessageIdsEmpty,
    /// A message to forward is protected (sent with noforwards): the whole forward is refused.
    ChatForwardsRestricted,
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
    /// A search query that is empty or only whitespace.
    SearchQueryEmpty,
    /// A search query shorter than the text index can look up (3 characters).
    SearchQueryTooShort,
    /// A search query longer than 256 characters.
    SearchQueryTooLong,
    /// Pinning past the most pinned dialogs a folder (or a filter) holds.
    PinnedDialogsTooMuch,
    /// A folder other than 0 (the main list) and 1 (the archive).
    FolderIdInvalid,
    /// Notification settings out of range (a negative `mute_until`).
    NotifySettingsInvalid,
    /// A dialog filter id out of range or not one of the caller's, or an order that is not
    /// every filter once.
    FilterIdInvalid,
    /// A dialog filter without a title.
    FilterTitleEmpty,
    /// A dialog filter's title or emoticon too long.
    FilterTitleInvalid,
    /// A dialog filter that includes nothing (no category, no included or pinned peer).
    FilterIncludeEmpty,
    /// A dialog filter with too many pinned and included peers.
    FilterIncludeTooMuch,
    /// A dialog filter with too many excluded peers.
    FilterExcludeTooMuch,
    /// More dialog filters than a user may have.
    DialogFiltersTooMuch,
    /// A last name longer than 64 characters.
    LastnameInvalid,
    /// An about text longer than 70 characters.
    AboutTooLong,
    /// A username that breaks the rules: 5 to 32 characters of a-z, 0-9 and `_`, starting
    /// with a letter, with no `__` and no `_` at the end.
    UsernameInvalid,
    /// Another user has this username (whatever its case).
    UsernameOccupied,
    /// The caller has this username already (or none, when removing it).
    UsernameNotModified,
    /// No user has this username.
    UsernameNotOccupied,
    /// No user the caller may find by phone has this phone.
    PhoneNotOccupied,
    /// A privacy rule of no known key.
    PrivacyKeyInvalid,
    /// A privacy rule of no known value.
    PrivacyValueInvalid,
    /// The user has no profile photo the caller may see.
    PhotoInvalid,
    /// SetTyping: the peer blocked the caller.
    UserIsBlocked,
    /// SetTyping: an action of no known kind, or a progress outside 0 to 100 (or on a kind
    /// that has none).
    SendActionInvalid,
    /// Too many requests: retry after the given seconds.
    FloodWait(u32),
    /// A dependency did not answer in time, or went away during the call (its process died,
    /// the database restarted): the request may not have taken effect, and may be retried
    /// (a send with the same random_id is stored at most once).
    Unavailable,
    Internal,
    // --- media: media messages ---
    /// A media item that is not one: no known kind, a bad attribute (a negative duration, a
    /// waveform on anything but a voice note, a document without a MIME type), or a photo
    /// (or thumbnail) that is not a JPEG, PNG or WebP image of at most 10 MiB.
    MediaInvalid,
    /// SendMedia without an item.
    MediaEmpty,
    /// An album of more than 10 items.
    MultiMediaTooLong,
    /// A caption longer than 1024 characters.
    MediaCaptionTooLong,
    /// A file reference that was good but is too old: read the message again for a fresh one.
    FileReferenceExpired,
    /// A file reference this server did not give this reader for this message, or a message
    /// without the file asked for.
    FileReferenceInvalid,
    /// Instant upload: no content with this hash and size that the caller may see (the same
    /// answer whether the server holds someone else's or nothing).
    FileHashUnknown,
    // --- faults: delivery order ---
    /// Internal (svc-dialogs' ApplyEvents): some events came ahead of a gap in their user's
    /// pts and were held back; the others were applied. Deliver them again shortly, after the
    /// missing ones: nothing is wrong with them, so the outbox retries them without growing
    /// its backoff.
    EventsAheadOfGap,
    // ops
    /// An admin API call without `authorization: Bearer <token>`, or with a token other than
    /// the configured `[admin] token`.
    AdminTokenInvalid,
    /// An admin limit rule names no rule of the gateway, or has a period outside 1 s..=1 day.
    LimitRuleInvalid,
    /// The user is on the operator's ban list: every call of a signed-in key is refused and
    /// the user's streams end, until the ban is lifted.
    UserDeactivatedBan,
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
            Self::MessageAuthorRequired => "MESSAGE_AUTHOR_REQUIRED",
            Self::MessageNotModified => "MESSAGE_NOT_MODIFIED",
            Self::ReactionInvalid => "REACTION_INVALID",
            Self::EditMessagesForbidden => "EDIT_MESSAGES_FORBIDDEN",
            Self::EntitiesTooLong => "ENTITIES_TOO_LONG",
            Self::EntityBoundsInvalid => "ENTITY_BOUNDS_INVALID",
            Self::EntityKindInvalid => "ENTITY_KIND_INVALID",
            Self::EntityNestingInvalid => "ENTITY_NESTING_INVALID",
            Self::EntityUrlInvalid => "ENTITY_URL_INVALID",
            Self::EntityMentionUserInvalid => "ENTITY_MENTION_USER_INVALID",
            Self::EntityLanguageInvalid => "ENTITY_LANGUAGE_INVALID",
            Self::QuoteTextInvalid => "QUOTE_TEXT_INVALID",
            Self::QuoteTextTooLong => "QUOTE_TEXT_TOO_LONG",
            Self::DeleteMessagesForbidden => "DELETE_MESSAGES_FORBIDDEN",
            Self::MessageIdsTooMany => "MESSAGE_IDS_TOO_MANY",
            Self::RandomIdInvalid => "RANDOM_ID_INVALID",
            Self::MessageIdsEmpty => "MESSAGE_IDS_EMPTY",
            Self::ChatForwardsRestricted => "CHAT_FORWARDS_RESTRICTED",
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
            Self::SearchQueryEmpty => "SEARCH_QUERY_EMPTY",
            Self::SearchQueryTooShort => "SEARCH_QUERY_TOO_SHORT",
            Self::SearchQueryTooLong => "SEARCH_QUERY_TOO_LONG",
            Self::PinnedDialogsTooMuch => "PINNED_DIALOGS_TOO_MUCH",
            Self::FolderIdInvalid => "FOLDER_ID_INVALID",
            Self::NotifySettingsInvalid => "NOTIFY_SETTINGS_INVALID",
            Self::FilterIdInvalid => "FILTER_ID_INVALID",
            Self::FilterTitleEmpty => "FILTER_TITLE_EMPTY",
            Self::FilterTitleInvalid => "FILTER_TITLE_INVALID",
            Self::FilterIncludeEmpty => "FILTER_INCLUDE_EMPTY",
            Self::FilterIncludeTooMuch => "FILTER_INCLUDE_TOO_MUCH",
            Self::FilterExcludeTooMuch => "FILTER_EXCLUDE_TOO_MUCH",
            Self::DialogFiltersTooMuch => "DIALOG_FILTERS_TOO_MUCH",
            Self::LastnameInvalid => "LASTNAME_INVALID",
            Self::AboutTooLong => "ABOUT_TOO_LONG",
            Self::UsernameInvalid => "USERNAME_INVALID",
            Self::UsernameOccupied => "USERNAME_OCCUPIED",
            Self::UsernameNotModified => "USERNAME_NOT_MODIFIED",
            Self::UsernameNotOccupied => "USERNAME_NOT_OCCUPIED",
            Self::PhoneNotOccupied => "PHONE_NOT_OCCUPIED",
            Self::PrivacyKeyInvalid => "PRIVACY_KEY_INVALID",
            Self::PrivacyValueInvalid => "PRIVACY_VALUE_INVALID",
            Self::PhotoInvalid => "PHOTO_INVALID",
            Self::UserIsBlocked => "USER_IS_BLOCKED",
            Self::SendActionInvalid => "SEND_ACTION_INVALID",
            Self::FloodWait(seconds) => return format!("FLOOD_WAIT_{seconds}"),
            Self::Unavailable => "SERVICE_UNAVAILABLE",
            Self::Internal => "INTERNAL",
            Self::MediaInvalid => "MEDIA_INVALID",
            Self::MediaEmpty => "MEDIA_EMPTY",
            Self::MultiMediaTooLong => "MULTI_MEDIA_TOO_LONG",
            Self::MediaCaptionTooLong => "MEDIA_CAPTION_TOO_LONG",
            Self::FileReferenceExpired => "FILE_REFERENCE_EXPIRED",
            Self::FileReferenceInvalid => "FILE_REFERENCE_INVALID",
            Self::FileHashUnknown => "FILE_HASH_UNKNOWN",
            Self::EventsAheadOfGap => "EVENTS_AHEAD_OF_GAP",
            // ops
            Self::AdminTokenInvalid => "ADMIN_TOKEN_INVALID",
            Self::LimitRuleInvalid => "LIMIT_RULE_INVALID",
            Self::UserDeactivatedBan => "USER_DEACTIVATED_BAN",
        };
        s.to_owned()
    }

    fn grpc_code(&self) -> Code {
        match self {
            Self::AuthKeyUnregistered | Self::AuthKeyInvalid => Code::Unauthenticated,
            Self::FloodWait(_) => Code::ResourceExhausted,
            Self::MessageAuthorRequired
            | Self::EditMessagesForbidden
            | Self::ChatForwardsRestricted
            | Self::DeleteMessagesForbidden
            | Self::UserIsBlocked => Code::PermissionDenied,
            Self::RandomIdDuplicate | Self::PhoneNumberOccupied | Self::UsernameOccupied => {
                Code::AlreadyExists
            }
            Self::PhoneNumberUnoccupied | Self::FilePartMissing | Self::MessageNotReadYet => {
                Code::FailedPrecondition
            }
            Self::Unavailable | Self::EventsAheadOfGap => Code::Unavailable,
            Self::Internal => Code::Internal,
            // ops
            Self::AdminTokenInvalid => Code::Unauthenticated,
            Self::UserDeactivatedBan => Code::PermissionDenied,
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

/// SQLSTATEs of a transaction that lost a race and can simply run again: serialization_failure
/// and deadlock_detected.
const RETRYABLE_SQLSTATES: [&str; 2] = ["40001", "40P01"];

impl From<sqlx::Error> for Error {
    /// Errors of a connection or server that went away are `SERVICE_UNAVAILABLE`: the caller
    /// cannot know whether its change was made, and a retry (idempotent by its key) finds out.
    /// They are also recorded, so that the pools test the connections that were idle at that
    /// moment before handing them out (`oxigram_storage::health`).
    fn from(err: sqlx::Error) -> Self {
        if oxigram_storage::health::note(&err) {
            tracing::warn!(error = %err, "lost the database connection");
            return Self::new(ErrorCode::Unavailable, "the database connection was lost");
        }
        match &err {
            sqlx::Error::PoolTimedOut => Self::new(ErrorCode::Unavailable, "database busy"),
            sqlx::Error::PoolClosed => {
                Self::new(ErrorCode::Unavailable, "the service is shutting down")
            }
            sqlx::Error::Database(db)
                if db
                    .code()
                    .is_some_and(|code| RETRYABLE_SQLSTATES.contains(&code.as_ref())) =>
            {
                tracing::warn!(error = %err, "transaction conflict");
                Self::new(ErrorCode::Unavailable, "transaction conflict")
            }
            _ => Self::internal(err),
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

/// What tonic's client says when the exchange itself failed, for statuses that reach us
/// without the error they were made from.
const TRANSPORT_FAILURES: [&str; 6] = [
    "transport error",
    "h2 protocol error",
    "connection reset",
    "broken pipe",
    "connection closed",
    "Unexpected EOF decoding stream",
];

/// Whether a status without our code was made by the client from a failed exchange (the
/// callee's process died mid-call, its connection was reset) rather than answered by the
/// callee: tonic builds those from the transport's error, which it keeps as the status'
/// source; a status that came over the wire has none.
fn is_transport_failure(status: &Status) -> bool {
    std::error::Error::source(status).is_some()
        || TRANSPORT_FAILURES
            .iter()
            .any(|phrase| status.message().contains(phrase))
}

/// Keeps a status from another service when it carries a stable code (it is meant for the
/// client). Anything else becomes `SERVICE_UNAVAILABLE` when the call may not have reached the
/// callee or its outcome is unknown (no answer in time, the connection failed or the callee's
/// process died mid-call: the client retries, idempotently), and `INTERNAL` otherwise.
pub fn forward(status: Status) -> Status {
    if code_of(&status).is_some() {
        return status;
    }
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled => {
            Error::new(ErrorCode::Unavailable, status.message().to_owned()).into()
        }
        // An HTTP/2 connection the callee ends with ENHANCE_YOUR_CALM (it saw more resets or
        // streams than it takes) fails every call on it as RESOURCE_EXHAUSTED: the callee was
        // overloaded, not wrong.
        Code::Unknown | Code::Internal | Code::ResourceExhausted
            if is_transport_failure(&status) =>
        {
            tracing::warn!(code = ?status.code(), message = status.message(), "a call to another service failed in transport");
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

/// `FILE_PART_MISSING`: an upload completed without all of its parts. `first_missing` is the
/// first part of `0..parts` not saved, carried in [`MISSING_PART_HEADER`] and the detail;
/// `None` when every one of them was saved but more were too (the count is what is wrong).
pub fn file_part_missing(first_missing: Option<i32>) -> Status {
    let Some(part) = first_missing else {
        return status(
            ErrorCode::FilePartMissing,
            "more parts were saved than the upload has",
        );
    };
    let mut missing = status(
        ErrorCode::FilePartMissing,
        &format!("part {part} was not saved"),
    );
    missing
        .metadata_mut()
        .insert(MISSING_PART_HEADER, MetadataValue::from(part));
    missing
}

/// The first missing part a [`file_part_missing`] status names, if it names one.
pub fn missing_part(status: &Status) -> Option<i32> {
    status
        .metadata()
        .get(MISSING_PART_HEADER)?
        .to_str()
        .ok()?
        .parse()
        .ok()
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
    fn a_missing_part_travels_with_its_number() {
        let cases = [(Some(0), Some(0)), (Some(7), Some(7)), (None, None)];
        for (first, read) in cases {
            let missing = file_part_missing(first);
            assert_eq!(code_of(&missing).as_deref(), Some("FILE_PART_MISSING"));
            assert_eq!(missing_part(&missing), read, "{first:?}");
            assert_eq!(missing_part(&forward(missing)), read, "forwarded");
        }
        let other = status(ErrorCode::FilePartMissing, "no header");
        assert_eq!(missing_part(&other), None);
    }

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
    fn lost_connections_are_retryable() {
        let lost: Status = Error::from(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset by peer",
        )))
        .into();
        assert_eq!(lost.code(), Code::Unavailable);
        assert_eq!(code_of(&lost).as_deref(), Some("SERVICE_UNAVAILABLE"));
        let closed: Status = Error::from(sqlx::Error::PoolClosed).into();
        assert_eq!(code_of(&closed).as_deref(), Some("SERVICE_UNAVAILABLE"));
        let bug: Status = Error::from(sqlx::Error::RowNotFound).into();
        assert_eq!(code_of(&bug).as_deref(), Some("INTERNAL"));
    }

    #[test]
    fn transport_failures_are_retryable() {
        // As tonic's client makes them when the callee's process dies mid-call.
        let reset = Status::from_error(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "connection reset by peer",
        )));
        assert!(matches!(reset.code(), Code::Unknown | Code::Unavailable));
        let forwarded = forward(reset);
        assert_eq!(forwarded.code(), Code::Unavailable);
        assert_eq!(code_of(&forwarded).as_deref(), Some("SERVICE_UNAVAILABLE"));
        let h2 = forward(Status::internal(
            "h2 protocol error: error reading a body from connection",
        ));
        assert_eq!(code_of(&h2).as_deref(), Some("SERVICE_UNAVAILABLE"));
        let calm = forward(Status::resource_exhausted("h2 protocol error: http2 error"));
        assert_eq!(code_of(&calm).as_deref(), Some("SERVICE_UNAVAILABLE"));
        // An answer of the callee without our code is a bug there, not a reason to retry.
        let answered = forward(Status::internal("failed to decode Protobuf message"));
        assert_eq!(code_of(&answered).as_deref(), Some("INTERNAL"));
        let too_big = forward(Status::resource_exhausted("message length too large"));
        assert_eq!(code_of(&too_big).as_deref(), Some("INTERNAL"));
    }

    #[test]
    fn foreign_statuses_are_masked() {
        let forwarded = forward(Status::unavailable("connection refused"));
        assert_eq!(code_of(&forwarded).as_deref(), Some("SERVICE_UNAVAILABLE"));
        let kept = forward(Error::new(ErrorCode::PeerIdInvalid, "no such user").into());
        assert_eq!(code_of(&kept).as_deref(), Some("PEER_ID_INVALID"));
    }
}
