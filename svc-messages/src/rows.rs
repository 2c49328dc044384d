//! The rows of messages' tables as Rust sees them: what a send writes (one body, a box per
//! owner) and what a read gives back (a box with its body), and their one mapping to and from
//! the `Message` an owner sees.

use std::collections::BTreeMap;

use oxigram_proto::types::v1::{
    Message, MessageFwdHeader, MessageMedia, Peer, ReactionCount, ReplyQuote, SendMessageRequest,
    message_media::Kind,
};
use oxigram_storage::batch_row;
use prost::Message as _;

use crate::{entities, file_reference};

batch_row! {
    /// A message_bodies row a send writes: the message as its sender wrote it.
    pub struct BodyRow {
        pub id: i64,
        pub sender_id: i64,
        /// The user it was sent to (the sender herself in Saved Messages).
        pub recipient_id: i64,
        pub text: String,
        /// Unix seconds.
        pub date: i64,
        pub silent: bool,
        pub noforwards: bool,
        /// The text's entities, stored (see [`entities::encode`]).
        pub entities: Vec<u8>,
        /// A reply's quote, stored (see [`entities::encode_quote`]).
        pub quote: Vec<u8>,
        /// The forward header, all 0 when the message is not a forward (see [`FwdColumns`]).
        pub fwd_from_user_id: i64,
        pub fwd_date: i64,
        pub fwd_msg_id: i64,
        pub fwd_saved_from_user_id: i64,
        pub fwd_saved_from_msg_id: i64,
        /// The media snapshot, stored (see [`encode_media`]); empty for none.
        pub media: Vec<u8>,
        /// The media's content hash ('' for none): instant upload asks by it.
        pub media_sha256: String,
        pub grouped_id: i64,
    }
}

/// A media snapshot as a body stores it: its protobuf encoding without the reader's
/// reference (each read stamps its own); empty for none.
pub fn encode_media(media: Option<&MessageMedia>) -> Vec<u8> {
    media.map_or_else(Vec::new, |m| {
        MessageMedia {
            file_reference: Vec::new(),
            ..m.clone()
        }
        .encode_to_vec()
    })
}

/// The media a body stores, as `owner_id`'s box `box_id` shows it: with a fresh reference.
pub fn decode_media(stored: &[u8], owner_id: i64, box_id: i64) -> Option<MessageMedia> {
    if stored.is_empty() {
        return None;
    }
    let mut media = MessageMedia::decode(stored).ok()?;
    file_reference::stamp(owner_id, box_id, &mut media);
    Some(media)
}

/// Whether the boxes of this media start unplayed (outside Saved Messages): voice and video
/// notes.
pub fn starts_unread(media: Option<&MessageMedia>) -> bool {
    media.is_some_and(|m| matches!(Kind::try_from(m.kind), Ok(Kind::Voice | Kind::VideoNote)))
}

batch_row! {
    /// A message_boxes row a send writes: one owner's box of a body.
    pub struct BoxRow {
        pub owner_id: i64,
        pub box_id: i64,
        pub peer_user_id: i64,
        pub body_id: i64,
        pub out: bool,
        pub reply_to_box_id: i64,
        pub date: i64,
        pub media_unread: bool,
    }
}

impl BoxRow {
    /// The box of `view`, the owner's view of a new message of `body_id` (see
    /// [`BodyRow::view`]).
    pub fn of(view: &Message, owner_id: i64, body_id: i64) -> Self {
        Self {
            owner_id,
            box_id: view.id,
            peer_user_id: view.peer_user(),
            body_id,
            out: view.out,
            reply_to_box_id: view.reply_to_msg_id,
            date: view.date,
            media_unread: view.media_unread,
        }
    }
}

impl BodyRow {
    /// The body of a new message `id` to `recipient_id`, sent now (`date`): a forward when it
    /// has a header; a quote of its reply, if it has one, is at `quote_offset` of the replied
    /// text.
    pub fn new(
        id: i64,
        sender_id: i64,
        recipient_id: i64,
        request: &SendMessageRequest,
        fwd_from: Option<&MessageFwdHeader>,
        date: i64,
        quote_offset: i32,
    ) -> Self {
        let fwd = FwdColumns::of(fwd_from);
        let quote = (!request.quote_text.is_empty()).then(|| ReplyQuote {
            text: request.quote_text.clone(),
            entities: request.quote_entities.clone(),
            offset: quote_offset,
        });
        Self {
            id,
            sender_id,
            recipient_id,
            text: request.text.clone(),
            date,
            silent: request.silent,
            noforwards: request.noforwards,
            entities: entities::encode(&request.entities),
            quote: entities::encode_quote(quote.as_ref()),
            fwd_from_user_id: fwd.fwd_from_user_id,
            fwd_date: fwd.fwd_date,
            fwd_msg_id: fwd.fwd_msg_id,
            fwd_saved_from_user_id: fwd.fwd_saved_from_user_id,
            fwd_saved_from_msg_id: fwd.fwd_saved_from_msg_id,
            media: encode_media(request.media.as_ref()),
            media_sha256: request
                .media
                .as_ref()
                .map_or_else(String::new, |m| m.sha256.clone()),
            grouped_id: request.grouped_id,
        }
    }

    /// The body's forward header columns.
    fn fwd(&self) -> FwdColumns {
        FwdColumns {
            fwd_from_user_id: self.fwd_from_user_id,
            fwd_date: self.fwd_date,
            fwd_msg_id: self.fwd_msg_id,
            fwd_saved_from_user_id: self.fwd_saved_from_user_id,
            fwd_saved_from_msg_id: self.fwd_saved_from_msg_id,
        }
    }

    /// The new message as `owner_id` sees it in her box `box_id`, the message being sent to
    /// `recipient_id`.
    pub fn view(
        &self,
        owner_id: i64,
        box_id: i64,
        recipient_id: i64,
        reply_to_box_id: i64,
    ) -> Message {
        let out = owner_id == self.sender_id;
        let media = decode_media(&self.media, owner_id, box_id).map(Box::new);
        Message {
            id: box_id,
            peer_id: Some(Peer::user(if out { recipient_id } else { self.sender_id })),
            from_user_id: self.sender_id,
            out,
            date: self.date,
            text: self.text.clone(),
            reply_to_msg_id: reply_to_box_id,
            silent: self.silent,
            noforwards: self.noforwards,
            edit_date: 0,
            entities: entities::decode(&self.entities),
            reply_quote: entities::decode_quote(&self.quote),
            fwd_from: self.fwd().header(),
            // Unplayed in both boxes: the sender's shows whether the recipient played it.
            media_unread: self.sender_id != self.recipient_id && starts_unread(media.as_deref()),
            media,
            grouped_id: self.grouped_id,
            // A new message has no reactions yet.
            reactions: Vec::new(),
            reaction_unread: false,
        }
    }
}

/// A message as one owner sees it: her box joined with the body (sql/messages_of_boxes.sql).
#[derive(Clone, sqlx::FromRow)]
pub struct MessageRow {
    pub owner_id: i64,
    pub box_id: i64,
    pub peer_user_id: i64,
    pub body_id: i64,
    pub out: bool,
    pub reply_to_box_id: i64,
    pub date: i64,
    pub sender_id: i64,
    pub text: String,
    pub silent: bool,
    pub noforwards: bool,
    pub edit_date: i64,
    pub entities: Vec<u8>,
    pub quote: Vec<u8>,
    #[sqlx(flatten)]
    pub fwd: FwdColumns,
    pub media: Vec<u8>,
    pub media_unread: bool,
    pub grouped_id: i64,
    pub reaction_unread: bool,
    /// The users who reacted to the body and their reactions, in user order.
    pub reactors: Vec<i64>,
    pub reactions: Vec<String>,
}

/// The reactions of `users` (each user's one reaction), as `owner_id` sees them: one count per
/// reaction, the most chosen first (then by reaction, so every owner lists them alike).
pub fn reaction_counts(owner_id: i64, users: &[i64], reactions: &[String]) -> Vec<ReactionCount> {
    let mut counts: BTreeMap<&str, ReactionCount> = BTreeMap::new();
    for (user, reaction) in users.iter().zip(reactions) {
        let count = counts
            .entry(reaction.as_str())
            .or_insert_with(|| ReactionCount {
                reaction: reaction.clone(),
                count: 0,
                chosen_by_me: false,
            });
        count.count += 1;
        count.chosen_by_me |= *user == owner_id;
    }
    let mut counts: Vec<ReactionCount> = counts.into_values().collect();
    counts.sort_by_key(|c| std::cmp::Reverse(c.count));
    counts
}

impl From<MessageRow> for Message {
    fn from(r: MessageRow) -> Self {
        Message {
            id: r.box_id,
            peer_id: Some(Peer::user(r.peer_user_id)),
            from_user_id: r.sender_id,
            out: r.out,
            date: r.date,
            text: r.text,
            reply_to_msg_id: r.reply_to_box_id,
            silent: r.silent,
            noforwards: r.noforwards,
            edit_date: r.edit_date,
            entities: entities::decode(&r.entities),
            reply_quote: entities::decode_quote(&r.quote),
            fwd_from: r.fwd.header(),
            media: decode_media(&r.media, r.owner_id, r.box_id).map(Box::new),
            media_unread: r.media_unread,
            grouped_id: r.grouped_id,
            reactions: reaction_counts(r.owner_id, &r.reactors, &r.reactions),
            reaction_unread: r.reaction_unread,
        }
    }
}

/// A forward header as a body stores it: `fwd_from_user_id` 0 when the message is not a
/// forward, `fwd_saved_from_user_id` 0 outside Saved Messages.
#[derive(sqlx::FromRow, Clone, Copy, Default)]
pub struct FwdColumns {
    pub fwd_from_user_id: i64,
    pub fwd_date: i64,
    pub fwd_msg_id: i64,
    pub fwd_saved_from_user_id: i64,
    pub fwd_saved_from_msg_id: i64,
}

impl FwdColumns {
    /// The columns of a header (all 0 for none).
    pub fn of(header: Option<&MessageFwdHeader>) -> Self {
        header.map_or_else(Self::default, |h| Self {
            fwd_from_user_id: h.from_user_id,
            fwd_date: h.date,
            fwd_msg_id: h.msg_id,
            fwd_saved_from_user_id: h
                .saved_from_peer
                .as_ref()
                .and_then(Peer::user_id)
                .unwrap_or(0),
            fwd_saved_from_msg_id: h.saved_from_msg_id,
        })
    }

    /// The header these columns hold, if the message is a forward.
    pub fn header(&self) -> Option<MessageFwdHeader> {
        (self.fwd_from_user_id != 0).then(|| MessageFwdHeader {
            from_user_id: self.fwd_from_user_id,
            date: self.fwd_date,
            msg_id: self.fwd_msg_id,
            saved_from_peer: (self.fwd_saved_from_user_id != 0)
                .then(|| Peer::user(self.fwd_saved_from_user_id)),
            saved_from_msg_id: self.fwd_saved_from_msg_id,
        })
    }
}
