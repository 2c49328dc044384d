//! The send transaction. Sends go in batches (the group commit's; a single send is a batch of
//! one), and a batch costs the same two statements whatever its size: the first claims every
//! key and takes every owner's box ids (sql/send_claim.sql), the second writes the bodies, the
//! boxes and the outbox rows (sql/send_write.sql). A batch with replies first resolves them
//! (and finds their quotes in the replied texts) all in one more statement, the replies
//! pre-pass (sql/send_replies.sql). Each statement is a
//! round trip, and under load every round trip waits for the backend and then for this task to
//! be scheduled again, so their number, not the rows they carry, is what a send's latency is
//! made of.
//!
//! A send whose key was used before is a replay: the keys a batch found used are read in one
//! more statement, and a replay with the same request gets the original message back. A key
//! repeated within a batch is sent in a second pass after the first commits, where it is a
//! replay like any later one. Commit means PERSISTED.

use std::{collections::HashSet, sync::LazyLock};

use oxigram_outbox::{NewRow, Outbox, Staged};
use oxigram_proto::types::v1::{
    Message, MessageFwdHeader, SendMessageRequest, Update, UpdateNewMessage, UserEvent, update,
};
use oxigram_storage::{
    batch_row,
    unnest::{BatchRow, Statement},
};
use prost::Message as _;
use sqlx::{PgConnection, PgPool};

use crate::{
    entities,
    outbound::{TO_UPDATES, new_message_event_id},
    rows::{BodyRow, BoxRow, MessageRow},
    store::messages_of,
};

/// A send that passed validation.
pub struct NewMessage {
    pub sender_id: i64,
    /// The user it is sent to, as the request's peer resolved (the sender in Saved Messages).
    pub peer_id: i64,
    /// The sender's device, which has the result already and gets no push.
    pub auth_key_id: i64,
    /// The client's request as the service checked it (a forward's: the source's content).
    pub request: SendMessageRequest,
    /// A forward's header (none for a send, or a forward that drops the author).
    pub fwd_from: Option<MessageFwdHeader>,
    /// What makes two sends with one key the same request.
    pub request_hash: Vec<u8>,
    /// The trace of the request: the events continue it.
    pub traceparent: Option<String>,
}

/// A new message: the sender's view, the events written, and their outbox rows.
pub struct Sent {
    pub message: Message,
    pub updates_events: Vec<UserEvent>,
    /// The outbox ids of the events for svc-updates.
    pub updates_rows: Vec<i64>,
}

/// What one send of a batch became.
pub enum SendOutcome {
    Sent(Sent),
    /// The key was used before with the same request: the original message, unchanged, and
    /// the sender's event of it (svc-updates answers it with the pts it got the first time).
    Replayed {
        message: Message,
        event: Box<UserEvent>,
    },
    /// The key was used before with a different request.
    KeyReused,
    /// reply_to_msg_id names no message of this dialog in the sender's box.
    ReplyInvalid,
    /// The reply's quote does not occur in the replied message's text.
    QuoteInvalid,
}

/// Sends a batch; one outcome per send, in order.
pub async fn send(
    pool: &PgPool,
    outbox: &Outbox,
    sends: &[NewMessage],
) -> Result<Vec<SendOutcome>, sqlx::Error> {
    let mut outcomes: Vec<Option<SendOutcome>> = sends.iter().map(|_| None).collect();
    let mut waiting: Vec<usize> = (0..sends.len()).collect();
    while !waiting.is_empty() {
        // The first send of each key goes now; a repeat waits for the next pass.
        let mut keys = HashSet::new();
        let (now, later): (Vec<usize>, Vec<usize>) = waiting
            .into_iter()
            .partition(|&i| keys.insert((sends[i].sender_id, sends[i].request.random_id)));
        let batch: Vec<&NewMessage> = now.iter().map(|&i| &sends[i]).collect();
        for (i, outcome) in now
            .into_iter()
            .zip(send_distinct(pool, outbox, &batch).await?)
        {
            outcomes[i] = Some(outcome);
        }
        waiting = later;
    }
    outcomes
        .into_iter()
        .map(|o| o.ok_or_else(|| sqlx::Error::Protocol("a send got no outcome".into())))
        .collect()
}

batch_row! {
    /// What the claim reads of a send.
    struct ClaimInput {
        sender_id: i64,
        random_id: i64,
        request_hash: Vec<u8>,
        peer_user_id: i64,
        /// No reply, or the replies pre-pass found the message it names.
        reply_valid: bool,
    }
}

/// One row of the claim: a send, and one owner's box id when it took any.
#[derive(sqlx::FromRow)]
struct ClaimRow {
    /// The send's position in the batch, from 1.
    n: i64,
    body_id: i64,
    claimed: bool,
    reply_valid: bool,
    owner_id: Option<i64>,
    box_id: Option<i64>,
}

/// What the claim made of one send.
enum Claim {
    /// The key was there before.
    Used,
    /// Claimed, but the reply names no message: the write releases the key.
    ReplyInvalid,
    /// Claimed, with the box id of each owner (ascending owners).
    Boxes {
        body_id: i64,
        box_ids: Vec<(i64, i64)>,
    },
}

/// What the replies pre-pass found of one send's reply.
#[derive(Clone, Copy, PartialEq)]
enum Reply {
    /// Not a reply.
    None,
    /// The message replied to, and the recipient's box id of it (0: she has none); where
    /// the reply's quote occurs in its text (0 without a quote).
    Found {
        recipient_box_id: i64,
        quote_offset: i32,
    },
    /// It names no message of this dialog in the sender's box.
    Invalid,
    /// It names one, but the reply's quote does not occur in its text.
    QuoteInvalid,
}

batch_row! {
    /// A key, as the write releases it and the replay pass looks it up.
    struct KeyRow {
        sender_id: i64,
        random_id: i64,
    }
}

batch_row! {
    /// An owner's box of a body, as the replay pass looks it up.
    struct BodyOf {
        owner_id: i64,
        body_id: i64,
    }
}

/// A key as its first send wrote it.
#[derive(sqlx::FromRow)]
struct UsedKey {
    sender_id: i64,
    random_id: i64,
    body_id: Option<i64>,
    request_hash: Vec<u8>,
}

/// Sends whose keys are distinct, in one transaction.
async fn send_distinct(
    pool: &PgPool,
    outbox: &Outbox,
    sends: &[&NewMessage],
) -> Result<Vec<SendOutcome>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let replies = replies(&mut tx, sends).await?;
    let claims = claim(&mut tx, sends, &replies).await?;

    let used: Vec<&NewMessage> = sends
        .iter()
        .zip(&claims)
        .filter(|(_, c)| matches!(c, Claim::Used))
        .map(|(m, _)| *m)
        .collect();
    let mut replays = replays(&mut tx, &used).await?.into_iter();

    let now = chrono::Utc::now().timestamp();
    let (mut bodies, mut boxes, mut released) = (vec![], vec![], vec![]);
    // The sends that took box ids: their outcome once the outbox ids are known.
    let mut composed = Vec::new();
    let mut outcomes: Vec<Option<SendOutcome>> = Vec::with_capacity(sends.len());
    for ((m, c), reply) in sends.iter().zip(claims).zip(replies) {
        outcomes.push(match c {
            Claim::Used => replays.next(),
            Claim::ReplyInvalid => {
                released.push(KeyRow {
                    sender_id: m.sender_id,
                    random_id: m.request.random_id,
                });
                Some(match reply {
                    Reply::QuoteInvalid => SendOutcome::QuoteInvalid,
                    _ => SendOutcome::ReplyInvalid,
                })
            }
            Claim::Boxes { body_id, box_ids } => {
                let (recipient_reply, quote_offset) = match reply {
                    Reply::Found {
                        recipient_box_id,
                        quote_offset,
                    } => (recipient_box_id, quote_offset),
                    Reply::None | Reply::Invalid | Reply::QuoteInvalid => (0, 0),
                };
                let body = BodyRow::new(
                    body_id,
                    m.sender_id,
                    m.peer_id,
                    &m.request,
                    m.fwd_from.as_ref(),
                    now,
                    quote_offset,
                );
                let views: Vec<(i64, Message)> = box_ids
                    .iter()
                    .map(|&(owner, box_id)| {
                        let reply = match owner == m.sender_id {
                            true => m.request.reply_to_msg_id,
                            false => recipient_reply,
                        };
                        (owner, body.view(owner, box_id, m.peer_id, reply))
                    })
                    .collect();
                boxes.extend(views.iter().map(|(o, v)| BoxRow::of(v, *o, body_id)));
                bodies.push(body);
                composed.push((outcomes.len(), compose(m, body_id, views)));
                None
            }
        });
    }

    if !bodies.is_empty() || !released.is_empty() {
        static WRITE: LazyLock<String> = LazyLock::new(|| {
            let own = Statement::new(include_str!("../sql/send_write.sql"))
                .rows::<BodyRow>("bodies")
                .rows::<BoxRow>("boxes")
                .rows::<KeyRow>("released");
            Staged::statement(&own.clone().into_sql(), own.next_parameter())
        });
        let staged = outbox.stage(composed.iter().flat_map(|(_, c)| &c.rows));
        let query = sqlx::query_as(WRITE.as_str());
        let query = KeyRow::bind(
            &released,
            BoxRow::bind(&boxes, BodyRow::bind(&bodies, query)),
        );
        let returned = staged.bind(query).fetch_all(&mut *tx).await?;
        let mut ids = staged.ids(returned)?.into_iter();
        for (at, c) in composed {
            let mine = ids.by_ref().take(c.rows.len()).collect();
            outcomes[at] = Some(SendOutcome::Sent(c.into_sent(mine)));
        }
    }
    tx.commit().await?;
    outcomes
        .into_iter()
        .map(|o| o.ok_or_else(|| sqlx::Error::Protocol("a send of a batch got no outcome".into())))
        .collect()
}

batch_row! {
    /// A reply, as the replies pre-pass looks it up.
    struct ReplyInput {
        sender_id: i64,
        peer_user_id: i64,
        reply_to_box_id: i64,
        /// The reply quotes: the pre-pass reads the replied text.
        quoted: bool,
    }
}

/// A reply the pre-pass found.
#[derive(sqlx::FromRow)]
struct ReplyRow {
    /// The send's position among the replies looked up, from 1.
    n: i64,
    recipient_box_id: Option<i64>,
    /// The replied message's text, for a reply that quotes.
    replied_text: Option<String>,
}

/// The replies pre-pass (sql/send_replies.sql): what each send's reply names, and where its
/// quote occurs in the replied text, in one statement for the whole batch, and none when it
/// has no reply.
async fn replies(tx: &mut PgConnection, sends: &[&NewMessage]) -> Result<Vec<Reply>, sqlx::Error> {
    let asked: Vec<usize> = (0..sends.len())
        .filter(|&i| sends[i].request.reply_to_msg_id != 0)
        .collect();
    let mut replies = vec![Reply::None; sends.len()];
    if asked.is_empty() {
        return Ok(replies);
    }
    static REPLIES: LazyLock<String> = LazyLock::new(|| {
        Statement::new(include_str!("../sql/send_replies.sql"))
            .rows::<ReplyInput>("replies")
            .into_sql()
    });
    let input: Vec<ReplyInput> = asked
        .iter()
        .map(|&i| ReplyInput {
            sender_id: sends[i].sender_id,
            peer_user_id: sends[i].peer_id,
            reply_to_box_id: sends[i].request.reply_to_msg_id,
            quoted: !sends[i].request.quote_text.is_empty(),
        })
        .collect();
    for &i in &asked {
        replies[i] = Reply::Invalid;
    }
    let found: Vec<ReplyRow> = ReplyInput::bind(&input, sqlx::query_as(REPLIES.as_str()))
        .fetch_all(tx)
        .await?;
    for row in found {
        let i = usize::try_from(row.n - 1)
            .ok()
            .and_then(|at| asked.get(at).copied())
            .ok_or_else(|| sqlx::Error::Protocol(format!("no reply at position {}", row.n)))?;
        let r = &sends[i].request;
        let quote_offset = match row.replied_text {
            Some(replied) => entities::quote_offset(&replied, &r.quote_text, r.quote_offset),
            None => Some(0),
        };
        replies[i] = match quote_offset {
            Some(quote_offset) => Reply::Found {
                recipient_box_id: row.recipient_box_id.unwrap_or(0),
                quote_offset,
            },
            None => Reply::QuoteInvalid,
        };
    }
    Ok(replies)
}

/// The claim statement; one [`Claim`] per send, in order.
async fn claim(
    tx: &mut PgConnection,
    sends: &[&NewMessage],
    replies: &[Reply],
) -> Result<Vec<Claim>, sqlx::Error> {
    static CLAIM: LazyLock<String> = LazyLock::new(|| {
        Statement::new(include_str!("../sql/send_claim.sql"))
            .rows::<ClaimInput>("sends")
            .into_sql()
    });
    let input: Vec<ClaimInput> = sends
        .iter()
        .zip(replies)
        .map(|(m, reply)| ClaimInput {
            sender_id: m.sender_id,
            random_id: m.request.random_id,
            request_hash: m.request_hash.clone(),
            peer_user_id: m.peer_id,
            reply_valid: matches!(reply, Reply::None | Reply::Found { .. }),
        })
        .collect();
    let rows: Vec<ClaimRow> = ClaimInput::bind(&input, sqlx::query_as(CLAIM.as_str()))
        .fetch_all(tx)
        .await?;
    let mut claims: Vec<Claim> = Vec::with_capacity(sends.len());
    for row in rows {
        let at = usize::try_from(row.n - 1)
            .ok()
            .filter(|&at| at == claims.len() || at + 1 == claims.len())
            .ok_or_else(|| sqlx::Error::Protocol(format!("no send at position {}", row.n)))?;
        let owner = row.owner_id.zip(row.box_id);
        if at + 1 == claims.len() {
            // Another owner of the same send.
            if let (Some(Claim::Boxes { box_ids, .. }), Some(owner)) = (claims.last_mut(), owner) {
                box_ids.push(owner);
            }
            continue;
        }
        claims.push(match (row.claimed, row.reply_valid, owner) {
            (false, _, _) => Claim::Used,
            (true, false, _) => Claim::ReplyInvalid,
            (true, true, owner) => Claim::Boxes {
                body_id: row.body_id,
                box_ids: owner.into_iter().collect(),
            },
        });
    }
    if claims.len() != sends.len() {
        return Err(sqlx::Error::Protocol(format!(
            "the claim answered {} of {} sends",
            claims.len(),
            sends.len()
        )));
    }
    Ok(claims)
}

/// The keys of these sends that were used before, as their first sends wrote them
/// (sql/used_keys.sql).
async fn used_keys(
    db: impl sqlx::PgExecutor<'_>,
    sends: &[&NewMessage],
) -> Result<Vec<UsedKey>, sqlx::Error> {
    static USED_KEYS: LazyLock<String> = LazyLock::new(|| {
        Statement::new(include_str!("../sql/used_keys.sql"))
            .rows::<KeyRow>("keys")
            .into_sql()
    });
    let keys: Vec<KeyRow> = sends
        .iter()
        .map(|m| KeyRow {
            sender_id: m.sender_id,
            random_id: m.request.random_id,
        })
        .collect();
    KeyRow::bind(&keys, sqlx::query_as(USED_KEYS.as_str()))
        .fetch_all(db)
        .await
}

/// Whether a key of these sends was used before for a different request: they would be
/// refused with `RANDOM_ID_DUPLICATE`. Asked before sending by a caller whose sends must all
/// be stored or none (a forward); a send alone needs no such question.
pub async fn any_key_reused(pool: &PgPool, sends: &[NewMessage]) -> Result<bool, sqlx::Error> {
    let sends: Vec<&NewMessage> = sends.iter().collect();
    let used = used_keys(pool, &sends).await?;
    Ok(used.iter().any(|k| {
        sends
            .iter()
            .find(|m| m.sender_id == k.sender_id && m.request.random_id == k.random_id)
            .is_some_and(|m| m.request_hash != k.request_hash)
    }))
}

/// The outcomes of sends whose keys were used before, in order: the original message when
/// the request is the same, else a reused key.
async fn replays(
    tx: &mut PgConnection,
    sends: &[&NewMessage],
) -> Result<Vec<SendOutcome>, sqlx::Error> {
    if sends.is_empty() {
        return Ok(vec![]);
    }
    static BOXES_OF_BODIES: LazyLock<String> = LazyLock::new(|| {
        Statement::new(&messages_of(include_str!("../sql/boxes_of_bodies.sql")))
            .rows::<BodyOf>("bodies")
            .into_sql()
    });
    let used = used_keys(&mut *tx, sends).await?;
    // The body of each send replayed with its original request.
    let replayed: Vec<Option<i64>> = sends
        .iter()
        .map(|m| {
            used.iter()
                .find(|k| k.sender_id == m.sender_id && k.random_id == m.request.random_id)
                .filter(|k| k.request_hash == m.request_hash)
                .and_then(|k| k.body_id)
        })
        .collect();
    let wanted: Vec<BodyOf> = sends
        .iter()
        .zip(&replayed)
        .filter_map(|(m, body)| body.map(|body_id| (m, body_id)))
        .flat_map(|(m, body_id)| {
            [m.sender_id, m.peer_id]
                .into_iter()
                .map(move |owner_id| BodyOf { owner_id, body_id })
        })
        .collect();
    let originals: Vec<MessageRow> = match wanted.is_empty() {
        true => vec![],
        false => {
            BodyOf::bind(&wanted, sqlx::query_as(BOXES_OF_BODIES.as_str()))
                .fetch_all(&mut *tx)
                .await?
        }
    };
    let box_of = |owner: i64, body: i64| {
        originals
            .iter()
            .find(|r| r.owner_id == owner && r.body_id == body)
    };
    sends
        .iter()
        .zip(replayed)
        .map(|(m, body)| {
            let Some(body_id) = body else {
                return Ok(SendOutcome::KeyReused);
            };
            let mine = box_of(m.sender_id, body_id).ok_or(sqlx::Error::RowNotFound)?;
            let peer_box = match m.peer_id == m.sender_id {
                true => 0,
                false => box_of(m.peer_id, body_id).map_or(0, |r| r.box_id),
            };
            let message = Message::from(mine.clone());
            let event = new_message_event(
                body_id,
                m.sender_id,
                message.clone(),
                m.auth_key_id,
                peer_box,
                m.request.random_id,
            );
            Ok(SendOutcome::Replayed {
                message,
                event: Box::new(event),
            })
        })
        .collect()
}

/// The new-message event of one owner's box; `random_id` is the sender's key, for the
/// sender's own event only (0 in the recipient's): her devices match their pending sends by
/// it.
pub fn new_message_event(
    body_id: i64,
    owner_id: i64,
    message: Message,
    auth_key_id: i64,
    peer_box_id: i64,
    random_id: i64,
) -> UserEvent {
    UserEvent {
        event_id: new_message_event_id(body_id, owner_id).to_string(),
        user_id: owner_id,
        pts_count: 1,
        date: message.date,
        update: Some(Update {
            kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                message: Some(message),
                random_id,
            })),
        }),
        origin_auth_key_id: auth_key_id,
        peer_box_id,
        pts: 0,
        deletions: Vec::new(),
        unread_reactions_delta: 0,
    }
}

/// What a new message hands on: one event per owner for svc-updates (by the fast path), in
/// the trace of the request that sent it. svc-dialogs learns of it from the update log.
struct Composed {
    sender_message: Message,
    updates_events: Vec<UserEvent>,
    rows: Vec<NewRow>,
}

impl Composed {
    /// The committed send, given its rows' outbox ids (in row order).
    fn into_sent(self, ids: Vec<i64>) -> Sent {
        Sent {
            message: self.sender_message,
            updates_events: self.updates_events,
            updates_rows: ids,
        }
    }
}

/// The events of a new message, from each owner's view (owners ascending).
fn compose(m: &NewMessage, body_id: i64, views: Vec<(i64, Message)>) -> Composed {
    let mut sender_message = Message::default();
    let mut updates_events = Vec::with_capacity(views.len());
    let mut rows = Vec::with_capacity(views.len());
    let box_ids: Vec<(i64, i64)> = views.iter().map(|(o, v)| (*o, v.id)).collect();
    for (owner, view) in views {
        let peer_box_id = box_ids
            .iter()
            .find(|(o, _)| *o != owner)
            .map_or(0, |(_, id)| *id);
        let random_id = match view.out {
            true => m.request.random_id,
            false => 0,
        };
        let event = new_message_event(
            body_id,
            owner,
            view.clone(),
            m.auth_key_id,
            peer_box_id,
            random_id,
        );
        rows.push(NewRow {
            destination: TO_UPDATES,
            event_id: new_message_event_id(body_id, owner),
            payload: event.encode_to_vec(),
            traceparent: m.traceparent.clone(),
        });
        updates_events.push(event);
        if view.out {
            sender_message = view;
        }
    }
    Composed {
        sender_message,
        updates_events,
        rows,
    }
}
