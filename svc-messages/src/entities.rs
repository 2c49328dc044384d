//! The formatting of a text: its entities (bold, code, links, mentions…) and a reply's quote.
//! Every rule about them lives here, for sends, edits and quotes alike: where an entity may
//! lie (UTF-16 code units within its text, never cutting a character in two), which fields
//! each kind has, how entities may nest, and where a quote occurs in the replied text. Also
//! the one encoding a body stores them in.

use oxigram_errors::{ErrorCode, status};
use oxigram_proto::types::v1::{MessageEntity, ReplyQuote, message_entity::Kind};
use prost::Message as _;
use tonic::Status;

/// Most entities one text may carry.
pub const MAX_ENTITIES: usize = 100;
/// Longest reply quote, in Unicode code points.
pub const MAX_QUOTE_CODE_POINTS: usize = 1024;
/// Longest text URL, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// Longest language name of a code block, in bytes.
pub const MAX_LANGUAGE_BYTES: usize = 32;

/// Checks `entities` against `text` and returns them in their one order (by offset, the
/// longer first, then by kind), so that two requests with the same entities in another order
/// are the same request, and an edit that only reorders them modifies nothing.
pub fn checked(text: &str, mut entities: Vec<MessageEntity>) -> Result<Vec<MessageEntity>, Status> {
    if entities.len() > MAX_ENTITIES {
        return Err(status(
            ErrorCode::EntitiesTooLong,
            &format!("at most {MAX_ENTITIES} entities"),
        ));
    }
    if entities.is_empty() {
        // A plain text costs the send nothing here.
        return Ok(entities);
    }
    let units = Utf16::of(text);
    for (i, e) in entities.iter().enumerate() {
        check_fields(i, e)?;
        if !units.holds(e.offset, e.length) {
            return Err(status(
                ErrorCode::EntityBoundsInvalid,
                &format!(
                    "entity {i}: offset {} length {} is not a run of whole characters of the \
                     text ({} UTF-16 code units)",
                    e.offset, e.length, units.len
                ),
            ));
        }
    }
    entities.sort_by_key(|e| (e.offset, std::cmp::Reverse(e.length), e.kind));
    check_nesting(&entities)?;
    Ok(entities)
}

/// The kind of `e` and the fields that kind has, and only those.
fn check_fields(i: usize, e: &MessageEntity) -> Result<(), Status> {
    let kind = Kind::try_from(e.kind).unwrap_or(Kind::Unspecified);
    if kind == Kind::Unspecified {
        return Err(status(
            ErrorCode::EntityKindInvalid,
            &format!("entity {i}: unknown kind {}", e.kind),
        ));
    }
    // NUL is refused in every text field alike, before any rule of the field's own.
    oxigram_errors::check_text("entities.url", &e.url)?;
    oxigram_errors::check_text("entities.language", &e.language)?;
    let foreign = (!e.language.is_empty() && kind != Kind::Pre)
        || (!e.url.is_empty() && kind != Kind::TextUrl)
        || (e.user_id != 0 && kind != Kind::MentionName);
    if foreign {
        return Err(status(
            ErrorCode::EntityKindInvalid,
            &format!(
                "entity {i}: a field its kind {} does not have",
                kind.as_str_name()
            ),
        ));
    }
    match kind {
        Kind::Pre if !language_valid(&e.language) => Err(status(
            ErrorCode::EntityLanguageInvalid,
            &format!("entity {i}: the language is not a short name"),
        )),
        Kind::TextUrl if !url_valid(&e.url) => Err(status(
            ErrorCode::EntityUrlInvalid,
            &format!("entity {i}: the url is not an http, https or tg URL"),
        )),
        Kind::MentionName if e.user_id <= 0 => Err(status(
            ErrorCode::EntityMentionUserInvalid,
            &format!("entity {i}: user_id must be positive"),
        )),
        _ => Ok(()),
    }
}

/// Empty, or up to 32 bytes of ASCII letters, digits and `+#._-` (`c++`, `c#`, `objective-c`).
fn language_valid(language: &str) -> bool {
    language.len() <= MAX_LANGUAGE_BYTES
        && language
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+#._-".contains(&b))
}

/// An absolute http or https URL with a host, or a tg URL, without spaces or control
/// characters (which a URL parser would silently drop).
fn url_valid(url: &str) -> bool {
    if url.is_empty()
        || url.len() > MAX_URL_BYTES
        || url.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return false;
    }
    match url::Url::parse(url) {
        Ok(u) => match u.scheme() {
            "http" | "https" => u.host_str().is_some_and(|h| !h.is_empty()),
            "tg" => true,
            _ => false,
        },
        Err(_) => false,
    }
}

/// Whether `outer` may hold `inner` (same run of text or a longer one around it).
fn may_hold(outer: Kind, inner: Kind) -> bool {
    let style = |k: Kind| {
        matches!(
            k,
            Kind::Bold | Kind::Italic | Kind::Underline | Kind::Strike | Kind::Spoiler
        )
    };
    let code = |k: Kind| matches!(k, Kind::Pre | Kind::Code);
    match outer {
        _ if code(outer) => false,
        _ if style(outer) || style(inner) => !code(inner),
        Kind::Blockquote => inner != Kind::Blockquote,
        _ => false,
    }
}

/// Entities sorted by offset, the longer first: two are apart, or the first holds the second.
fn check_nesting(sorted: &[MessageEntity]) -> Result<(), Status> {
    let kind = |e: &MessageEntity| Kind::try_from(e.kind).unwrap_or(Kind::Unspecified);
    let end = |e: &MessageEntity| i64::from(e.offset) + i64::from(e.length);
    for (i, a) in sorted.iter().enumerate() {
        for b in &sorted[i + 1..] {
            if b.offset >= a.offset + a.length {
                // Every later entity starts later still: none overlaps `a`.
                break;
            }
            let same_run = a.offset == b.offset && a.length == b.length;
            let refused = if end(b) > end(a) {
                Some("overlap partly")
            } else if !(may_hold(kind(a), kind(b)) || same_run && may_hold(kind(b), kind(a))) {
                Some("nest in a way their kinds do not allow")
            } else {
                None
            };
            if let Some(why) = refused {
                return Err(status(
                    ErrorCode::EntityNestingInvalid,
                    &format!(
                        "{} at {}+{} and {} at {}+{} {why}",
                        kind(a).as_str_name(),
                        a.offset,
                        a.length,
                        kind(b).as_str_name(),
                        b.offset,
                        b.length
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A text's length in UTF-16 code units and where its characters start.
struct Utf16 {
    len: i64,
    /// The units that are the second half of a surrogate pair: no entity starts or ends there.
    inside: Vec<i64>,
}

impl Utf16 {
    fn of(text: &str) -> Self {
        let (mut len, mut inside) = (0i64, Vec::new());
        for c in text.chars() {
            if c.len_utf16() == 2 {
                inside.push(len + 1);
            }
            len += c.len_utf16() as i64;
        }
        Self { len, inside }
    }

    /// Whether `offset`, `length` is a non-empty run of whole characters of the text.
    fn holds(&self, offset: i32, length: i32) -> bool {
        let (start, end) = (i64::from(offset), i64::from(offset) + i64::from(length));
        offset >= 0
            && length > 0
            && end <= self.len
            && self.inside.binary_search(&start).is_err()
            && self.inside.binary_search(&end).is_err()
    }
}

/// A reply quote's own rules (those that need no replied message): none at all, or a quote of
/// a reply, not only whitespace, at most 1024 characters, at a non-negative offset, with valid
/// entities (returned in their one order, as [`checked`] does).
pub fn checked_quote(
    reply_to_msg_id: i64,
    text: &str,
    entities: Vec<MessageEntity>,
    offset: Option<i32>,
) -> Result<Vec<MessageEntity>, Status> {
    if text.is_empty() {
        if !entities.is_empty() || offset.is_some() {
            return Err(status(
                ErrorCode::QuoteTextInvalid,
                "quote_entities and quote_offset need a quote_text",
            ));
        }
        return Ok(entities);
    }
    oxigram_errors::check_text("quote_text", text)?;
    if reply_to_msg_id == 0 {
        return Err(status(
            ErrorCode::QuoteTextInvalid,
            "a quote needs reply_to_msg_id",
        ));
    }
    if text.trim().is_empty() {
        return Err(status(ErrorCode::QuoteTextInvalid, "the quote has no text"));
    }
    if text.chars().count() > MAX_QUOTE_CODE_POINTS {
        return Err(status(
            ErrorCode::QuoteTextTooLong,
            &format!("the quote is longer than {MAX_QUOTE_CODE_POINTS} characters"),
        ));
    }
    if offset.is_some_and(|o| o < 0) {
        return Err(status(
            ErrorCode::QuoteTextInvalid,
            "quote_offset must not be negative",
        ));
    }
    checked(text, entities)
}

/// Where `quote` occurs in `replied`, in UTF-16 code units: at `offset` when it is given, else
/// its first occurrence; `None` when it does not occur there.
pub fn quote_offset(replied: &str, quote: &str, offset: Option<i32>) -> Option<i32> {
    let at = match offset {
        Some(offset) => {
            let offset = usize::try_from(offset).ok()?;
            let mut units = 0;
            let at = replied
                .char_indices()
                .map(|(at, c)| {
                    let start = units;
                    units += c.len_utf16();
                    (at, start)
                })
                .chain(std::iter::once((replied.len(), units_of(replied))))
                .find(|&(_, start)| start >= offset)
                .filter(|&(_, start)| start == offset)?
                .0;
            replied[at..].starts_with(quote).then_some(at)?
        }
        None => replied.find(quote)?,
    };
    i32::try_from(units_of(&replied[..at])).ok()
}

fn units_of(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// How a body stores a list of entities (message_bodies.entities): the protobuf encoding of
/// the list, empty for none.
#[derive(Clone, PartialEq, prost::Message)]
struct Stored {
    #[prost(message, repeated, tag = "1")]
    entities: Vec<MessageEntity>,
}

/// The stored form of `entities`.
pub fn encode(entities: &[MessageEntity]) -> Vec<u8> {
    if entities.is_empty() {
        return Vec::new();
    }
    Stored {
        entities: entities.to_vec(),
    }
    .encode_to_vec()
}

/// The entities a body stored. Only this service writes the column, so bytes that do not
/// decode are a bug: logged, and the text shown unformatted rather than not at all.
pub fn decode(stored: &[u8]) -> Vec<MessageEntity> {
    if stored.is_empty() {
        return Vec::new();
    }
    Stored::decode(stored).map_or_else(
        |err| {
            tracing::error!(error = %err, "stored entities do not decode");
            Vec::new()
        },
        |s| s.entities,
    )
}

/// The stored form of a reply quote (message_bodies.quote): its protobuf encoding, empty for
/// none.
pub fn encode_quote(quote: Option<&ReplyQuote>) -> Vec<u8> {
    quote.map_or_else(Vec::new, |q| q.encode_to_vec())
}

/// The reply quote a body stored, if any (see [`decode`] for bytes that do not decode).
pub fn decode_quote(stored: &[u8]) -> Option<ReplyQuote> {
    if stored.is_empty() {
        return None;
    }
    ReplyQuote::decode(stored)
        .inspect_err(|err| tracing::error!(error = %err, "a stored reply quote does not decode"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(kind: Kind, offset: i32, length: i32) -> MessageEntity {
        MessageEntity {
            kind: kind as i32,
            offset,
            length,
            ..Default::default()
        }
    }

    fn with(mut entity: MessageEntity, f: impl FnOnce(&mut MessageEntity)) -> MessageEntity {
        f(&mut entity);
        entity
    }

    fn code(r: Result<Vec<MessageEntity>, Status>) -> Option<String> {
        r.err().and_then(|s| oxigram_errors::code_of(&s))
    }

    #[test]
    fn entities_table() {
        use Kind::*;
        // 11 units: "hello world"; with an emoji (two units) at 6..8 in the second text.
        let text = "hello world";
        let emoji = "hello 😀 you";
        let url = |u: &str| with(e(TextUrl, 0, 5), |x| x.url = u.into());
        let table: Vec<(&str, Vec<MessageEntity>, Option<&str>)> = vec![
            (text, vec![], None),
            (text, vec![e(Bold, 0, 11)], None),
            (text, vec![e(Bold, 0, 5), e(Italic, 6, 5)], None),
            // Styles nest in each other and around anything but code.
            (
                text,
                vec![e(Bold, 0, 11), e(Italic, 0, 5), e(Underline, 1, 2)],
                None,
            ),
            (
                text,
                vec![e(Bold, 0, 11), url("https://example.com/a?b=c")],
                None,
            ),
            (
                text,
                vec![url("http://example.com"), e(Spoiler, 0, 5)],
                None,
            ),
            (text, vec![e(Mention, 0, 5), e(Strike, 0, 5)], None),
            (text, vec![e(Blockquote, 0, 11), e(Pre, 0, 5)], None),
            (text, vec![e(Blockquote, 0, 11), e(Bold, 0, 11)], None),
            (text, vec![url("tg://resolve?domain=oxigram")], None),
            (
                text,
                vec![with(e(Pre, 0, 11), |x| x.language = "c++".into())],
                None,
            ),
            (
                text,
                vec![with(e(MentionName, 0, 5), |x| x.user_id = 7)],
                None,
            ),
            (
                text,
                [Url, Email, Hashtag, BotCommand, Cashtag, Phone, Code]
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| e(k, i as i32, 1))
                    .collect(),
                None,
            ),
            (emoji, vec![e(Bold, 6, 2)], None),
            (emoji, vec![e(Bold, 0, 12)], None),
            // Bounds, in UTF-16 code units.
            (text, vec![e(Bold, 0, 12)], Some("ENTITY_BOUNDS_INVALID")),
            (text, vec![e(Bold, 11, 1)], Some("ENTITY_BOUNDS_INVALID")),
            (text, vec![e(Bold, -1, 2)], Some("ENTITY_BOUNDS_INVALID")),
            (text, vec![e(Bold, 2, 0)], Some("ENTITY_BOUNDS_INVALID")),
            (text, vec![e(Bold, 2, -1)], Some("ENTITY_BOUNDS_INVALID")),
            (
                text,
                vec![e(Bold, i32::MAX, i32::MAX)],
                Some("ENTITY_BOUNDS_INVALID"),
            ),
            (emoji, vec![e(Bold, 7, 1)], Some("ENTITY_BOUNDS_INVALID")),
            (emoji, vec![e(Bold, 6, 1)], Some("ENTITY_BOUNDS_INVALID")),
            (emoji, vec![e(Bold, 0, 13)], Some("ENTITY_BOUNDS_INVALID")),
            // Count.
            (
                text,
                (0..101).map(|_| e(Bold, 0, 1)).collect(),
                Some("ENTITIES_TOO_LONG"),
            ),
            (text, (0..100).map(|_| e(Bold, 0, 1)).collect(), None),
            // Kinds and their fields.
            (
                text,
                vec![e(Unspecified, 0, 1)],
                Some("ENTITY_KIND_INVALID"),
            ),
            (
                text,
                vec![MessageEntity {
                    kind: 99,
                    offset: 0,
                    length: 1,
                    ..Default::default()
                }],
                Some("ENTITY_KIND_INVALID"),
            ),
            (
                text,
                vec![with(e(Bold, 0, 1), |x| x.url = "https://a.b".into())],
                Some("ENTITY_KIND_INVALID"),
            ),
            (
                text,
                vec![with(e(Code, 0, 1), |x| x.language = "rust".into())],
                Some("ENTITY_KIND_INVALID"),
            ),
            (
                text,
                vec![with(e(Mention, 0, 1), |x| x.user_id = 3)],
                Some("ENTITY_KIND_INVALID"),
            ),
            // Text URLs.
            (text, vec![url("")], Some("ENTITY_URL_INVALID")),
            (text, vec![url("example.com")], Some("ENTITY_URL_INVALID")),
            (
                text,
                vec![url("javascript:alert(1)")],
                Some("ENTITY_URL_INVALID"),
            ),
            (
                text,
                vec![url("ftp://example.com")],
                Some("ENTITY_URL_INVALID"),
            ),
            (
                text,
                vec![url("https://exa mple.com")],
                Some("ENTITY_URL_INVALID"),
            ),
            (text, vec![url("https://")], Some("ENTITY_URL_INVALID")),
            (
                text,
                vec![url(&format!("https://a.b/{}", "x".repeat(2048)))],
                Some("ENTITY_URL_INVALID"),
            ),
            // Mentions by id and code languages.
            (
                text,
                vec![e(MentionName, 0, 5)],
                Some("ENTITY_MENTION_USER_INVALID"),
            ),
            (
                text,
                vec![with(e(MentionName, 0, 5), |x| x.user_id = -4)],
                Some("ENTITY_MENTION_USER_INVALID"),
            ),
            (
                text,
                vec![with(e(Pre, 0, 5), |x| x.language = "a b".into())],
                Some("ENTITY_LANGUAGE_INVALID"),
            ),
            (
                text,
                vec![with(e(Pre, 0, 5), |x| x.language = "c\0".into())],
                Some("INPUT_TEXT_INVALID"),
            ),
            (
                text,
                vec![url("https://a.b/\0")],
                Some("INPUT_TEXT_INVALID"),
            ),
            (
                text,
                vec![with(e(Pre, 0, 5), |x| x.language = "x".repeat(33))],
                Some("ENTITY_LANGUAGE_INVALID"),
            ),
            // Nesting.
            (
                text,
                vec![e(Bold, 0, 6), e(Italic, 3, 6)],
                Some("ENTITY_NESTING_INVALID"),
            ),
            (
                text,
                vec![e(Code, 0, 11), e(Bold, 2, 3)],
                Some("ENTITY_NESTING_INVALID"),
            ),
            (
                text,
                vec![e(Bold, 0, 11), e(Pre, 2, 3)],
                Some("ENTITY_NESTING_INVALID"),
            ),
            (
                text,
                vec![e(Code, 0, 5), e(Italic, 0, 5)],
                Some("ENTITY_NESTING_INVALID"),
            ),
            (
                text,
                vec![url("https://a.b"), e(Mention, 1, 2)],
                Some("ENTITY_NESTING_INVALID"),
            ),
            (
                text,
                vec![e(Blockquote, 0, 11), e(Blockquote, 2, 3)],
                Some("ENTITY_NESTING_INVALID"),
            ),
            (
                text,
                vec![e(Hashtag, 0, 5), e(Url, 0, 5)],
                Some("ENTITY_NESTING_INVALID"),
            ),
        ];
        for (i, (text, entities, expected)) in table.into_iter().enumerate() {
            assert_eq!(
                code(checked(text, entities)).as_deref(),
                expected,
                "row {i}"
            );
        }
    }

    #[test]
    fn entities_get_one_order() -> Result<(), Status> {
        let a = checked(
            "hello world",
            vec![
                e(Kind::Italic, 6, 5),
                e(Kind::Underline, 0, 2),
                e(Kind::Bold, 0, 11),
            ],
        )?;
        let b = checked(
            "hello world",
            vec![
                e(Kind::Bold, 0, 11),
                e(Kind::Italic, 6, 5),
                e(Kind::Underline, 0, 2),
            ],
        )?;
        assert_eq!(a, b);
        assert_eq!(encode(&a), encode(&b));
        let spans: Vec<(i32, i32)> = a.iter().map(|e| (e.offset, e.length)).collect();
        assert_eq!(spans, [(0, 11), (0, 2), (6, 5)]);
        Ok(())
    }

    #[test]
    fn stored_entities_round_trip() {
        let list = vec![
            e(Kind::Bold, 0, 3),
            with(e(Kind::TextUrl, 4, 2), |x| x.url = "https://a.b".into()),
        ];
        assert_eq!(decode(&encode(&list)), list);
        assert!(encode(&[]).is_empty(), "no entities store nothing");
        assert!(decode(&[]).is_empty());
        let quote = ReplyQuote {
            text: "hi".into(),
            entities: list,
            offset: 4,
        };
        assert_eq!(decode_quote(&encode_quote(Some(&quote))), Some(quote));
        assert_eq!(decode_quote(&encode_quote(None)), None);
    }

    /// A quote to check: (reply_to_msg_id, text, entities, offset).
    type QuoteCase<'a> = (i64, &'a str, Vec<MessageEntity>, Option<i32>);

    #[test]
    fn quotes_table() {
        let long = "é".repeat(1025);
        let ok = "é".repeat(1024);
        let bold = |o, l| vec![e(Kind::Bold, o, l)];
        let table: Vec<(QuoteCase, Option<&str>)> = vec![
            ((0, "", vec![], None), None),
            ((5, "", vec![], None), None),
            ((5, "quoted", vec![], None), None),
            ((5, "quoted", bold(0, 6), Some(3)), None),
            ((5, &ok, vec![], None), None),
            ((0, "quoted", vec![], None), Some("QUOTE_TEXT_INVALID")),
            ((5, "", bold(0, 1), None), Some("QUOTE_TEXT_INVALID")),
            ((5, "", vec![], Some(0)), Some("QUOTE_TEXT_INVALID")),
            ((5, "  ", vec![], None), Some("QUOTE_TEXT_INVALID")),
            ((5, "quoted", vec![], Some(-1)), Some("QUOTE_TEXT_INVALID")),
            ((5, &long, vec![], None), Some("QUOTE_TEXT_TOO_LONG")),
            (
                (5, "quoted", bold(0, 7), None),
                Some("ENTITY_BOUNDS_INVALID"),
            ),
            ((5, "a\0b", vec![], None), Some("INPUT_TEXT_INVALID")),
        ];
        for (i, ((reply, text, entities, offset), expected)) in table.into_iter().enumerate() {
            assert_eq!(
                code(checked_quote(reply, text, entities, offset)).as_deref(),
                expected,
                "row {i}"
            );
        }
    }

    #[test]
    fn quotes_are_found_in_utf16_units() {
        let replied = "a 😀 b, then b again";
        let table = [
            ("b", None, Some(5)),
            ("b", Some(5), Some(5)),
            ("b again", Some(13), Some(13)),
            ("b", Some(13), Some(13)),
            ("b", Some(4), None),
            // Inside the emoji's surrogate pair.
            ("b", Some(3), None),
            ("😀 b", Some(2), Some(2)),
            ("missing", None, None),
            ("again", Some(100), None),
            ("a 😀 b, then b again", Some(0), Some(0)),
        ];
        for (quote, offset, expected) in table {
            assert_eq!(
                quote_offset(replied, quote, offset),
                expected,
                "{quote:?} at {offset:?}"
            );
        }
    }
}
