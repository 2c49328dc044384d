//! Message formatting on the command line: entities given as `KIND:OFFSET:LENGTH[:ARG]`
//! (`bold:0:5`, `text_url:6:4:https://example.com`, `pre:0:9:rust`, `mention_name:0:3:42`),
//! and entities and reply quotes printed compactly after a message's text.

use oxigram_proto::types::v1::{MessageEntity, ReplyQuote, message_entity::Kind};

/// An entity from `KIND:OFFSET:LENGTH[:ARG]`: ARG is the url of `text_url`, the language of
/// `pre`, the user id of `mention_name`. Offsets and lengths count UTF-16 code units.
pub fn parse_entity(s: &str) -> Result<MessageEntity, String> {
    let mut parts = s.splitn(4, ':');
    let (kind, offset, length, arg) = (
        parts.next().unwrap_or_default(),
        parts.next().ok_or("expected KIND:OFFSET:LENGTH[:ARG]")?,
        parts.next().ok_or("expected KIND:OFFSET:LENGTH[:ARG]")?,
        parts.next().unwrap_or_default(),
    );
    let kind = Kind::from_str_name(&kind.to_ascii_uppercase())
        .filter(|k| *k != Kind::Unspecified)
        .ok_or_else(|| format!("unknown entity kind {kind:?}"))?;
    let mut entity = MessageEntity {
        kind: kind as i32,
        offset: offset.parse().map_err(|e| format!("offset: {e}"))?,
        length: length.parse().map_err(|e| format!("length: {e}"))?,
        ..Default::default()
    };
    match kind {
        Kind::TextUrl => entity.url = arg.to_owned(),
        Kind::Pre => entity.language = arg.to_owned(),
        Kind::MentionName => entity.user_id = arg.parse().map_err(|e| format!("user id: {e}"))?,
        _ if !arg.is_empty() => return Err(format!("{} takes no argument", kind.as_str_name())),
        _ => {}
    }
    Ok(entity)
}

/// ` [bold 0+5, text_url 6+4 https://…]`, or nothing without entities.
pub fn show_entities(entities: &[MessageEntity]) -> String {
    if entities.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = entities
        .iter()
        .map(|e| {
            let kind = Kind::try_from(e.kind).map_or_else(
                |_| format!("kind{}", e.kind),
                |k| k.as_str_name().to_ascii_lowercase(),
            );
            let arg = match Kind::try_from(e.kind) {
                Ok(Kind::TextUrl) => format!(" {}", e.url),
                Ok(Kind::Pre) if !e.language.is_empty() => format!(" {}", e.language),
                Ok(Kind::MentionName) => format!(" user {}", e.user_id),
                _ => String::new(),
            };
            format!("{kind} {}+{}{arg}", e.offset, e.length)
        })
        .collect();
    format!(" [{}]", shown.join(", "))
}

/// ` (quoting "…" at 6 [bold 0+3])`, or nothing without a quote.
pub fn show_quote(quote: Option<&ReplyQuote>) -> String {
    quote.map_or_else(String::new, |q| {
        format!(
            " (quoting {:?} at {}{})",
            q.text,
            q.offset,
            show_entities(&q.entities)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_parse_and_show_back() {
        let given = [
            "bold:0:5",
            "text_url:6:4:https://example.com/a:b",
            "pre:0:9:rust",
            "mention_name:0:3:42",
            "SPOILER:1:2",
        ];
        let parsed: Result<Vec<MessageEntity>, String> =
            given.iter().map(|s| parse_entity(s)).collect();
        assert_eq!(
            parsed.map(|p| show_entities(&p)).as_deref(),
            Ok(
                " [bold 0+5, text_url 6+4 https://example.com/a:b, pre 0+9 rust, \
                mention_name 0+3 user 42, spoiler 1+2]"
            )
        );
        for bad in [
            "bold",
            "bold:0",
            "sparkle:0:1",
            "bold:x:1",
            "bold:0:1:extra",
            "mention_name:0:1:me",
        ] {
            assert!(parse_entity(bad).is_err(), "{bad}");
        }
        assert_eq!(show_entities(&[]), "");
        assert_eq!(show_quote(None), "");
    }
}
