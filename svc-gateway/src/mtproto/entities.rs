//! Message formatting between Telegram's entities and oxigram's. Both count offsets and lengths
//! in UTF-16 code units, so runs carry over as they are; svc-messages checks them as it checks
//! the gRPC door's (bounds, nesting, URLs), the one place that rule lives.

use oxigram_mtproto::session::RpcError;
use oxigram_proto::types::v1::{MessageEntity, message_entity::Kind};
use oxigram_tl::{enums, types};

/// A message's entities as Telegram's; `None` when it has none (the field is then absent).
pub fn to_tl(entities: &[MessageEntity]) -> Option<Vec<enums::MessageEntity>> {
    if entities.is_empty() {
        return None;
    }
    Some(entities.iter().filter_map(entity_to_tl).collect())
}

fn entity_to_tl(e: &MessageEntity) -> Option<enums::MessageEntity> {
    let (offset, length) = (e.offset, e.length);
    macro_rules! run {
        ($variant:ident, $ty:ident) => {
            enums::MessageEntity::$variant(types::$ty { offset, length })
        };
    }
    Some(match e.kind() {
        Kind::Unspecified => return None,
        Kind::Bold => run!(Bold, MessageEntityBold),
        Kind::Italic => run!(Italic, MessageEntityItalic),
        Kind::Underline => run!(Underline, MessageEntityUnderline),
        Kind::Strike => run!(Strike, MessageEntityStrike),
        Kind::Spoiler => run!(Spoiler, MessageEntitySpoiler),
        Kind::Code => run!(Code, MessageEntityCode),
        Kind::Mention => run!(Mention, MessageEntityMention),
        Kind::Url => run!(Url, MessageEntityUrl),
        Kind::Email => run!(Email, MessageEntityEmail),
        Kind::Hashtag => run!(Hashtag, MessageEntityHashtag),
        Kind::BotCommand => run!(BotCommand, MessageEntityBotCommand),
        Kind::Cashtag => run!(Cashtag, MessageEntityCashtag),
        Kind::Phone => run!(Phone, MessageEntityPhone),
        Kind::Pre => enums::MessageEntity::Pre(types::MessageEntityPre {
            offset,
            length,
            language: e.language.clone(),
        }),
        Kind::TextUrl => enums::MessageEntity::TextUrl(types::MessageEntityTextUrl {
            offset,
            length,
            url: e.url.clone(),
        }),
        Kind::MentionName => enums::MessageEntity::MentionName(types::MessageEntityMentionName {
            offset,
            length,
            user_id: e.user_id,
        }),
        Kind::Blockquote => enums::MessageEntity::Blockquote(types::MessageEntityBlockquote {
            collapsed: false,
            offset,
            length,
        }),
    })
}

/// A request's entities as oxigram's; a kind oxigram has no form of is `ENTITY_KIND_INVALID`
/// (as the gRPC door answers an unknown kind), a mention of anyone but a user by id
/// `ENTITY_MENTION_USER_INVALID`.
pub fn from_tl(
    entities: Option<&[enums::MessageEntity]>,
    me: i64,
) -> Result<Vec<MessageEntity>, RpcError> {
    entities
        .unwrap_or_default()
        .iter()
        .map(|e| entity_from_tl(e, me))
        .collect()
}

fn entity_from_tl(e: &enums::MessageEntity, me: i64) -> Result<MessageEntity, RpcError> {
    use enums::MessageEntity as T;
    let plain = |kind: Kind, offset: i32, length: i32| MessageEntity {
        kind: kind.into(),
        offset,
        length,
        ..Default::default()
    };
    Ok(match e {
        T::Bold(r) => plain(Kind::Bold, r.offset, r.length),
        T::Italic(r) => plain(Kind::Italic, r.offset, r.length),
        T::Underline(r) => plain(Kind::Underline, r.offset, r.length),
        T::Strike(r) => plain(Kind::Strike, r.offset, r.length),
        T::Spoiler(r) => plain(Kind::Spoiler, r.offset, r.length),
        T::Code(r) => plain(Kind::Code, r.offset, r.length),
        T::Mention(r) => plain(Kind::Mention, r.offset, r.length),
        T::Url(r) => plain(Kind::Url, r.offset, r.length),
        T::Email(r) => plain(Kind::Email, r.offset, r.length),
        T::Hashtag(r) => plain(Kind::Hashtag, r.offset, r.length),
        T::BotCommand(r) => plain(Kind::BotCommand, r.offset, r.length),
        T::Cashtag(r) => plain(Kind::Cashtag, r.offset, r.length),
        T::Phone(r) => plain(Kind::Phone, r.offset, r.length),
        T::Blockquote(r) => plain(Kind::Blockquote, r.offset, r.length),
        T::Pre(r) => MessageEntity {
            language: r.language.clone(),
            ..plain(Kind::Pre, r.offset, r.length)
        },
        T::TextUrl(r) => MessageEntity {
            url: r.url.clone(),
            ..plain(Kind::TextUrl, r.offset, r.length)
        },
        T::MentionName(r) => MessageEntity {
            user_id: r.user_id,
            ..plain(Kind::MentionName, r.offset, r.length)
        },
        T::InputMessageEntityMentionName(r) => {
            let user_id = match &r.user_id {
                enums::InputUser::UserSelf => me,
                enums::InputUser::User(u) => u.user_id,
                _ => return Err(RpcError::new(400, "ENTITY_MENTION_USER_INVALID")),
            };
            MessageEntity {
                user_id,
                ..plain(Kind::MentionName, r.offset, r.length)
            }
        }
        _ => return Err(RpcError::new(400, "ENTITY_KIND_INVALID")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_oxigram_kind_survives_a_round_trip() {
        let kinds = [
            Kind::Bold,
            Kind::Italic,
            Kind::Underline,
            Kind::Strike,
            Kind::Spoiler,
            Kind::Code,
            Kind::Pre,
            Kind::TextUrl,
            Kind::Mention,
            Kind::MentionName,
            Kind::Url,
            Kind::Email,
            Kind::Hashtag,
            Kind::BotCommand,
            Kind::Cashtag,
            Kind::Phone,
            Kind::Blockquote,
        ];
        let entities: Vec<MessageEntity> = kinds
            .iter()
            .enumerate()
            .map(|(i, kind)| MessageEntity {
                kind: (*kind).into(),
                offset: i as i32,
                length: 2,
                language: if *kind == Kind::Pre {
                    "rust".into()
                } else {
                    String::new()
                },
                url: if *kind == Kind::TextUrl {
                    "https://x.y".into()
                } else {
                    String::new()
                },
                user_id: if *kind == Kind::MentionName { 9 } else { 0 },
            })
            .collect();
        let tl = to_tl(&entities).unwrap_or_default();
        assert_eq!(tl.len(), kinds.len());
        assert_eq!(from_tl(Some(&tl), 1), Ok(entities));
        assert_eq!(to_tl(&[]), None);
    }

    #[test]
    fn what_oxigram_cannot_keep_is_refused() {
        let cases = [
            (
                enums::MessageEntity::CustomEmoji(types::MessageEntityCustomEmoji {
                    offset: 0,
                    length: 1,
                    document_id: 5,
                }),
                "ENTITY_KIND_INVALID",
            ),
            (
                enums::MessageEntity::InputMessageEntityMentionName(
                    types::InputMessageEntityMentionName {
                        offset: 0,
                        length: 1,
                        user_id: enums::InputUser::Empty,
                    },
                ),
                "ENTITY_MENTION_USER_INVALID",
            ),
        ];
        for (entity, code) in cases {
            let refused = from_tl(Some(&[entity]), 1);
            assert_eq!(
                refused.map_err(|e| (e.code, e.message)),
                Err((400, code.into()))
            );
        }
        let me = from_tl(
            Some(&[enums::MessageEntity::InputMessageEntityMentionName(
                types::InputMessageEntityMentionName {
                    offset: 0,
                    length: 1,
                    user_id: enums::InputUser::UserSelf,
                },
            )]),
            42,
        );
        assert_eq!(me.map(|e| e[0].user_id), Ok(42));
    }
}
