//! The edit transaction: the author's new text and entities for one of her messages. The body is shared,
//! so one edit changes the message in every owner's box that still holds it, and each of
//! those owners gets an edit event in her update log, written to the outbox for svc-updates
//! in the same transaction as the change (three statements: lock, boxes, write).

use std::sync::LazyLock;

use oxigram_outbox::{NewRow, Outbox, Staged};
use oxigram_proto::types::v1::{
    EditMessageRequest, Message, Update, UpdateEditMessage, UserEvent, update,
};
use prost::Message as _;
use sqlx::{PgConnection, PgPool};

use crate::{
    entities,
    outbound::{TO_UPDATES, edit_event_id},
    rows::{self, MessageRow},
    service::MAX_CAPTION_CODE_POINTS,
    store::messages_of,
};

/// An edit that passed validation.
pub struct Edit {
    pub owner_id: i64,
    /// The user of the dialog, as the request's peer resolved (the editor in Saved Messages).
    pub peer_id: i64,
    /// The editor's device, which has the result already and gets no push.
    pub auth_key_id: i64,
    pub request: EditMessageRequest,
    /// The trace of the request: the events continue it.
    pub traceparent: Option<String>,
}

/// A committed edit: the editor's view, the events written, and their outbox rows.
pub struct Edited {
    pub message: Message,
    pub updates_events: Vec<UserEvent>,
    /// The outbox ids of the events for svc-updates.
    pub updates_rows: Vec<i64>,
}

/// What an edit became. Every outcome but `Edited` changed nothing.
pub enum EditOutcome {
    /// Boxed: a message is large beside the other outcomes.
    Edited(Box<Edited>),
    /// The id names no message of this dialog in the editor's box.
    IdInvalid,
    /// The editor did not write the message.
    AuthorRequired,
    /// The message has no file, and the new text is empty or only whitespace.
    TextEmpty,
    /// The message keeps its file, and the new text is too long for a caption.
    CaptionTooLong,
    /// The text and entities are the message's already.
    NotModified,
    /// The peer blocked the editor: her box is not to change.
    Forbidden,
}

/// The editor's box and its locked body (sql/edit_lock.sql).
#[derive(sqlx::FromRow)]
struct Locked {
    peer_user_id: i64,
    body_id: i64,
    sender_id: i64,
    /// Not 0 for a forward: its text is its original author's.
    fwd_from_user_id: i64,
    text: String,
    /// Stored (see [`entities::encode`]).
    entities: Vec<u8>,
    /// Stored (see [`rows::encode_media`]).
    media: Vec<u8>,
    edit_version: i32,
    blocked: bool,
}

/// The boxes of `body_id` the owner and the peer of its dialog hold, not deleted, as they show
/// now (index message_boxes_body): whose view of the message a change of its body changes.
pub(crate) async fn boxes_of_body(
    tx: &mut PgConnection,
    owner_id: i64,
    peer_id: i64,
    body_id: i64,
) -> Result<Vec<MessageRow>, sqlx::Error> {
    static BOXES: LazyLock<String> =
        LazyLock::new(|| messages_of(include_str!("../sql/edit_boxes.sql")));
    let mut owners = vec![owner_id];
    if peer_id != owner_id {
        owners.push(peer_id);
    }
    sqlx::query_as(BOXES.as_str())
        .bind(&owners)
        .bind(body_id)
        .fetch_all(tx)
        .await
}

/// Edits one message.
pub async fn edit(pool: &PgPool, outbox: &Outbox, edit: &Edit) -> Result<EditOutcome, sqlx::Error> {
    let r = &edit.request;
    let mut tx = pool.begin().await?;
    let locked: Option<Locked> = sqlx::query_as(include_str!("../sql/edit_lock.sql"))
        .bind(edit.owner_id)
        .bind(r.id)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(locked) = locked.filter(|l| l.peer_user_id == edit.peer_id) else {
        return Ok(EditOutcome::IdInvalid);
    };
    // A forward's text is its original author's, not the forwarder's to change.
    if locked.sender_id != edit.owner_id || locked.fwd_from_user_id != 0 {
        return Ok(EditOutcome::AuthorRequired);
    }
    // Entities come in their one order (`entities::checked`), so equal lists encode alike.
    let entities = entities::encode(&r.entities);
    // A new media replaces the old; without one the media stays.
    let media = match &r.media {
        Some(new) => rows::encode_media(Some(new)),
        None => locked.media.clone(),
    };
    // A message with a file has a caption, which may be empty; one without needs its text.
    if media.is_empty() && r.text.trim().is_empty() {
        return Ok(EditOutcome::TextEmpty);
    }
    if !media.is_empty() && r.text.chars().count() > MAX_CAPTION_CODE_POINTS {
        return Ok(EditOutcome::CaptionTooLong);
    }
    if locked.text == r.text && locked.entities == entities && locked.media == media {
        return Ok(EditOutcome::NotModified);
    }
    if locked.blocked {
        return Ok(EditOutcome::Forbidden);
    }

    let boxes = boxes_of_body(&mut tx, edit.owner_id, edit.peer_id, locked.body_id).await?;

    let edit_date = chrono::Utc::now().timestamp();
    let version = locked.edit_version + 1;
    let mut message = None;
    let (mut events, mut rows) = (Vec::new(), Vec::new());
    for row in boxes {
        let owner = row.owner_id;
        let box_id = row.box_id;
        let view = Message {
            text: r.text.clone(),
            entities: r.entities.clone(),
            edit_date,
            media: rows::decode_media(&media, owner, box_id).map(Box::new),
            ..Message::from(row)
        };
        let event_id = edit_event_id(locked.body_id, version, owner);
        let event = UserEvent {
            event_id: event_id.to_string(),
            user_id: owner,
            pts_count: 1,
            date: edit_date,
            update: Some(Update {
                kind: Some(update::Kind::EditMessage(UpdateEditMessage {
                    message: Some(view.clone()),
                })),
            }),
            origin_auth_key_id: edit.auth_key_id,
            peer_box_id: 0,
            pts: 0,
            deletions: Vec::new(),
            unread_reactions_delta: 0,
        };
        rows.push(NewRow {
            destination: TO_UPDATES,
            event_id,
            payload: event.encode_to_vec(),
            traceparent: edit.traceparent.clone(),
        });
        events.push(event);
        if owner == edit.owner_id {
            message = Some(view);
        }
    }
    let message = message.ok_or(sqlx::Error::RowNotFound)?;

    static WRITE: LazyLock<String> =
        LazyLock::new(|| Staged::statement(include_str!("../sql/edit_write.sql"), 8));
    let staged = outbox.stage(&rows);
    let query = sqlx::query_as(WRITE.as_str())
        .bind(&r.text)
        .bind(&entities)
        .bind(edit_date)
        .bind(version)
        .bind(locked.body_id)
        .bind(&media)
        .bind(
            r.media
                .as_ref()
                .map_or_else(String::new, |m| m.sha256.clone()),
        );
    let returned = staged.bind(query).fetch_all(&mut *tx).await?;
    let updates_rows = staged.ids(returned)?;
    tx.commit().await?;
    Ok(EditOutcome::Edited(Box::new(Edited {
        message,
        updates_events: events,
        updates_rows,
    })))
}
