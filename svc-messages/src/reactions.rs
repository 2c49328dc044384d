//! The reaction transactions. A user has at most one reaction to a message; it is stored on the
//! shared body, so every owner's box shows the same reactions, and each owner whose box holds
//! the message gets an update naming it in her own ids. A reaction of the peer to the author's
//! message is unread in the author's box until she reads the dialog's reactions; the events of
//! her log say by how much her dialog's unread count moves, svc-dialogs adds it up. Events are
//! written to the outbox for svc-updates in the change's transaction. A change that changes
//! nothing writes no event and moves no pts.

use oxigram_outbox::{NewRow, Outbox};
use oxigram_proto::types::v1::{
    Message, Peer, Update, UpdateMessageReactions, UpdateReadReactions, UserEvent, update,
};
use prost::Message as _;
use sqlx::PgPool;
use uuid::Uuid;

use crate::{edit::boxes_of_body, outbound::TO_UPDATES};

/// Longest reaction, in Unicode code points: an emoji with its modifiers and joiners.
pub const MAX_REACTION_CODE_POINTS: usize = 16;

/// A reaction that passed validation.
pub struct React {
    pub owner_id: i64,
    /// The user of the dialog, as the request's peer resolved (the owner in Saved Messages).
    pub peer_id: i64,
    /// The reacting device, which has the result already and gets no push.
    pub auth_key_id: i64,
    /// The owner's box id of the message.
    pub msg_id: i64,
    /// The emoji, empty to remove the owner's reaction.
    pub reaction: String,
    /// The trace of the request: the events continue it.
    pub traceparent: Option<String>,
}

/// A read of a dialog's reactions that passed validation.
pub struct ReadReactions {
    pub owner_id: i64,
    pub peer_id: i64,
    pub auth_key_id: i64,
    pub traceparent: Option<String>,
}

/// A committed change: the events written and their outbox rows; both empty when nothing
/// changed.
#[derive(Default)]
pub struct Logged {
    pub updates_events: Vec<UserEvent>,
    /// The outbox ids of the events for svc-updates.
    pub updates_rows: Vec<i64>,
}

/// What a reaction became. Every outcome but `Changed` changed nothing.
pub enum ReactOutcome {
    /// The reaction is set, replaced or removed, and the owners' events are written (none when
    /// the reaction was the owner's already).
    Changed(Logged),
    /// The id names no message of this dialog in the owner's box.
    IdInvalid,
    /// The peer blocked the owner: her box of the message is left as it is.
    Blocked,
}

/// The reactor's box and its locked body (sql/edit_lock.sql, the lock every change of a
/// body's shared state takes; the columns a reaction needs).
#[derive(sqlx::FromRow)]
struct Locked {
    peer_user_id: i64,
    body_id: i64,
    sender_id: i64,
    blocked: bool,
}

/// Sets, replaces or removes the owner's reaction to one message.
pub async fn react(pool: &PgPool, outbox: &Outbox, r: &React) -> Result<ReactOutcome, sqlx::Error> {
    let mut tx = pool.begin().await?;
    // Primary keys of message_boxes and message_bodies; the body stays locked until commit, so
    // the reactions each event lists are those of the reactions committed before it.
    let locked: Option<Locked> = sqlx::query_as(include_str!("../sql/edit_lock.sql"))
        .bind(r.owner_id)
        .bind(r.msg_id)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(locked) = locked.filter(|l| l.peer_user_id == r.peer_id) else {
        return Ok(ReactOutcome::IdInvalid);
    };
    if locked.blocked {
        return Ok(ReactOutcome::Blocked);
    }
    // Primary key of message_reactions.
    let before: Option<String> = sqlx::query_scalar(
        "SELECT reaction FROM message_reactions WHERE body_id = $1 AND user_id = $2",
    )
    .bind(locked.body_id)
    .bind(r.owner_id)
    .fetch_optional(&mut *tx)
    .await?;
    if before.as_deref().unwrap_or_default() == r.reaction {
        return Ok(ReactOutcome::Changed(Logged::default()));
    }
    let date = chrono::Utc::now().timestamp();
    if r.reaction.is_empty() {
        // Primary key of message_reactions.
        sqlx::query("DELETE FROM message_reactions WHERE body_id = $1 AND user_id = $2")
            .bind(locked.body_id)
            .bind(r.owner_id)
            .execute(&mut *tx)
            .await?;
    } else {
        sqlx::query(include_str!("../sql/reaction_write.sql"))
            .bind(locked.body_id)
            .bind(r.owner_id)
            .bind(&r.reaction)
            .bind(date)
            .execute(&mut *tx)
            .await?;
    }
    // A reaction of the peer to the author's message is news to the author until she reads
    // it; removed before that, it is news no more. Her own reactions never are.
    let author = locked.sender_id;
    let mut unread_delta = 0;
    if author != r.owner_id {
        let unread = !r.reaction.is_empty();
        let marked: Option<i64> =
            sqlx::query_scalar(include_str!("../sql/reaction_unread_mark.sql"))
                .bind(author)
                .bind(locked.body_id)
                .bind(unread)
                .fetch_optional(&mut *tx)
                .await?;
        if marked.is_some() {
            unread_delta = if unread { 1 } else { -1 };
        }
    }

    let boxes = boxes_of_body(&mut tx, r.owner_id, r.peer_id, locked.body_id).await?;
    let events: Vec<UserEvent> = boxes
        .into_iter()
        .map(|row| {
            let owner = row.owner_id;
            let peer = row.peer_user_id;
            let message = Message::from(row);
            UserEvent {
                user_id: owner,
                date,
                update: Some(Update {
                    kind: Some(update::Kind::MessageReactions(UpdateMessageReactions {
                        peer: Some(Peer::user(peer)),
                        msg_id: message.id,
                        reactions: message.reactions,
                        reaction_unread: message.reaction_unread,
                    })),
                }),
                unread_reactions_delta: if owner == author { unread_delta } else { 0 },
                ..event_of(r.owner_id, r.auth_key_id, owner)
            }
        })
        .collect();
    let logged = log(&mut tx, outbox, events, &r.traceparent).await?;
    tx.commit().await?;
    Ok(ReactOutcome::Changed(logged))
}

/// The owner saw the reactions to her messages of one dialog: none of them is unread any more.
pub async fn read_reactions(
    pool: &PgPool,
    outbox: &Outbox,
    r: &ReadReactions,
) -> Result<Logged, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let mut read: Vec<i64> = sqlx::query_scalar(include_str!("../sql/reactions_read.sql"))
        .bind(r.owner_id)
        .bind(r.peer_id)
        .fetch_all(&mut *tx)
        .await?;
    if read.is_empty() {
        return Ok(Logged::default());
    }
    read.sort_unstable();
    let unread_reactions_delta = -(read.len() as i32);
    let event = UserEvent {
        date: chrono::Utc::now().timestamp(),
        update: Some(Update {
            kind: Some(update::Kind::ReadReactions(UpdateReadReactions {
                peer: Some(Peer::user(r.peer_id)),
                messages: read,
            })),
        }),
        unread_reactions_delta,
        ..event_of(r.owner_id, r.auth_key_id, r.owner_id)
    };
    let logged = log(&mut tx, outbox, vec![event], &r.traceparent).await?;
    tx.commit().await?;
    Ok(logged)
}

/// An event of `owner`'s log caused by `actor`'s device `auth_key_id`, which gets no push of
/// it. Each change is its own fact: its id is fixed here, and the relay and the fast path both
/// hand on that one, so svc-updates logs it once.
fn event_of(actor: i64, auth_key_id: i64, owner: i64) -> UserEvent {
    UserEvent {
        event_id: Uuid::new_v4().to_string(),
        user_id: owner,
        pts_count: 1,
        origin_auth_key_id: if owner == actor { auth_key_id } else { 0 },
        ..Default::default()
    }
}

/// Writes `events` to the outbox for svc-updates in `tx`.
async fn log(
    tx: &mut sqlx::PgConnection,
    outbox: &Outbox,
    events: Vec<UserEvent>,
    traceparent: &Option<String>,
) -> Result<Logged, sqlx::Error> {
    let rows = events
        .iter()
        .map(|e| {
            let event_id =
                Uuid::parse_str(&e.event_id).map_err(|err| sqlx::Error::Decode(Box::new(err)))?;
            Ok(NewRow {
                destination: TO_UPDATES,
                event_id,
                payload: e.encode_to_vec(),
                traceparent: traceparent.clone(),
            })
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let updates_rows = outbox.enqueue(tx, &rows).await?;
    Ok(Logged {
        updates_events: events,
        updates_rows,
    })
}
