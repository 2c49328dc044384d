//! The SQL of messages: the send transaction and the owner-view reads.

use std::sync::LazyLock;

use oxigram_outbox::{NewRow, Outbox, Staged};
use oxigram_proto::types::v1::{Message, Update, UpdateNewMessage, UserEvent, update};
use prost::Message as _;
use sqlx::{PgConnection, PgPool, Row, postgres::PgRow};

use crate::outbound::{TO_UPDATES, new_message_event_id};

/// A send that passed validation.
pub struct NewMessage {
    pub sender_id: i64,
    pub peer_user_id: i64,
    pub random_id: i64,
    pub text: String,
    pub reply_to_msg_id: i64,
    pub silent: bool,
    pub noforwards: bool,
    pub auth_key_id: i64,
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

/// What a send transaction did.
pub enum SendOutcome {
    Sent(Sent),
    /// The key was used before with the same request: the original message, unchanged.
    Replayed {
        message: Message,
        event: UserEvent,
    },
    /// The key was used before with a different request.
    KeyReused,
    /// reply_to_msg_id names no message of this dialog in the sender's box.
    ReplyInvalid,
}

const MESSAGE_COLUMNS: &str = "b.box_id, b.peer_user_id, b.out, b.reply_to_box_id, b.date, \
     m.sender_id, m.text, m.silent, m.noforwards, m.edit_date";
/// The columns of message_boxes that [`with_bodies`] reads.
const BOX_COLUMNS: &str = "box_id, peer_user_id, out, reply_to_box_id, date, body_id";

/// The messages of a query of boxes (selecting [`BOX_COLUMNS`], a page at most), each box's
/// body probed by primary key. A plain join may be planned as a hash join over a scan of every
/// body ever sent, whose cost grows with the whole service; probing costs one index lookup per
/// box of the page, whatever the number of bodies.
fn with_bodies(boxes: &str, order: &str) -> String {
    format!(
        "SELECT {MESSAGE_COLUMNS} FROM ({boxes}) b
         CROSS JOIN LATERAL (
             SELECT sender_id, text, silent, noforwards, edit_date FROM message_bodies
             WHERE id = b.body_id LIMIT 1
         ) m
         ORDER BY b.box_id {order}"
    )
}

fn message_from_row(r: &PgRow) -> Result<Message, sqlx::Error> {
    Ok(Message {
        id: r.try_get("box_id")?,
        peer_user_id: r.try_get("peer_user_id")?,
        from_user_id: r.try_get("sender_id")?,
        out: r.try_get("out")?,
        date: r.try_get("date")?,
        text: r.try_get("text")?,
        reply_to_msg_id: r.try_get("reply_to_box_id")?,
        silent: r.try_get("silent")?,
        noforwards: r.try_get("noforwards")?,
        edit_date: r.try_get("edit_date")?,
    })
}

/// The new-message event of one owner's box.
pub fn new_message_event(
    body_id: i64,
    owner_id: i64,
    message: Message,
    auth_key_id: i64,
    peer_box_id: i64,
) -> UserEvent {
    UserEvent {
        event_id: new_message_event_id(body_id, owner_id).to_string(),
        user_id: owner_id,
        pts_count: 1,
        date: message.date,
        update: Some(Update {
            kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                message: Some(message),
            })),
        }),
        origin_auth_key_id: auth_key_id,
        peer_box_id,
        pts: 0,
    }
}

/// The send transaction. Commit means PERSISTED.
pub async fn send(
    pool: &PgPool,
    outbox: &Outbox,
    m: &NewMessage,
) -> Result<SendOutcome, sqlx::Error> {
    let mut tx = pool.begin().await?;
    // One statement: claim the key (a concurrent send with the same key waits here for the
    // first to finish), see whether the recipient blocked the sender, and, only when the key
    // was claimed, take a box id for each owner (primary keys of idempotency_keys, blocks and
    // box_sequences; owners in ascending order so crossing sends never deadlock).
    let is_self = m.sender_id == m.peer_user_id;
    let candidates: Vec<i64> = if is_self {
        vec![m.sender_id]
    } else {
        vec![m.sender_id, m.peer_user_id]
    };
    let row = sqlx::query(
        "WITH claim AS (
            INSERT INTO idempotency_keys (sender_id, random_id, request_hash) VALUES ($1, $2, $3)
            ON CONFLICT (sender_id, random_id) DO NOTHING RETURNING 1
         ), blocked AS (
            SELECT EXISTS (SELECT 1 FROM blocks WHERE owner_id = $4 AND blocked_user_id = $1) AS b
         ), seq AS (
            INSERT INTO box_sequences (owner_id, last_box_id)
            SELECT o, 1 FROM UNNEST($5::bigint[]) AS o
            WHERE EXISTS (SELECT 1 FROM claim) AND (o = $1 OR NOT (SELECT b FROM blocked))
            ORDER BY o
            ON CONFLICT (owner_id) DO UPDATE SET last_box_id = box_sequences.last_box_id + 1
            RETURNING owner_id, last_box_id
         )
         SELECT EXISTS (SELECT 1 FROM claim) AS claimed,
                coalesce((SELECT array_agg(owner_id ORDER BY owner_id) FROM seq), '{}') AS owners,
                coalesce((SELECT array_agg(last_box_id ORDER BY owner_id) FROM seq), '{}') AS box_ids",
    )
    .bind(m.sender_id)
    .bind(m.random_id)
    .bind(&m.request_hash)
    .bind(m.peer_user_id)
    .bind(&candidates)
    .fetch_one(&mut *tx)
    .await?;
    let claimed: bool = row.try_get("claimed")?;
    let owners: Vec<i64> = row.try_get("owners")?;
    let box_ids: Vec<(i64, i64)> = owners
        .into_iter()
        .zip(row.try_get::<Vec<i64>, _>("box_ids")?)
        .collect();
    if !claimed {
        let row = sqlx::query(
            "SELECT body_id, request_hash FROM idempotency_keys WHERE sender_id = $1 AND random_id = $2",
        )
        .bind(m.sender_id)
        .bind(m.random_id)
        .fetch_one(&mut *tx)
        .await?;
        let hash: Vec<u8> = row.try_get("request_hash")?;
        let body_id: Option<i64> = row.try_get("body_id")?;
        return Ok(match body_id {
            Some(body_id) if hash == m.request_hash => {
                let message = box_of_body(&mut tx, m.sender_id, body_id).await?;
                let peer_box = match m.peer_user_id == m.sender_id {
                    true => None,
                    false => box_id_of_body(&mut tx, m.peer_user_id, body_id).await?,
                };
                let event = new_message_event(
                    body_id,
                    m.sender_id,
                    message.clone(),
                    m.auth_key_id,
                    peer_box.unwrap_or(0),
                );
                SendOutcome::Replayed { message, event }
            }
            _ => SendOutcome::KeyReused,
        });
    }

    let now = chrono::Utc::now().timestamp();
    let (reply_body, reply_box) = if m.reply_to_msg_id != 0 {
        let row = sqlx::query(
            "SELECT body_id FROM message_boxes
             WHERE owner_id = $1 AND box_id = $2 AND peer_user_id = $3 AND NOT deleted",
        )
        .bind(m.sender_id)
        .bind(m.reply_to_msg_id)
        .bind(m.peer_user_id)
        .fetch_optional(&mut *tx)
        .await?;
        match row {
            Some(r) => (Some(r.try_get::<i64, _>("body_id")?), m.reply_to_msg_id),
            None => return Ok(SendOutcome::ReplyInvalid),
        }
    } else {
        (None, 0)
    };

    // A recipient who blocked the sender got no box id: no box, no event, no push.
    let delivered = box_ids.iter().any(|(owner, _)| *owner != m.sender_id);
    let recipient_reply = match reply_body {
        Some(body) if delivered => box_id_of_body(&mut tx, m.peer_user_id, body)
            .await?
            .unwrap_or(0),
        _ => 0,
    };
    let views = owner_views(m, &box_ids, now, reply_box, recipient_reply);

    // The body, the key's body id and every box, in one statement.
    let body_id: i64 = sqlx::query_scalar(
        "WITH body AS (
            INSERT INTO message_bodies (sender_id, text, date, silent, noforwards)
            VALUES ($1, $2, $3, $4, $5) RETURNING id
         ), key AS (
            UPDATE idempotency_keys SET body_id = (SELECT id FROM body)
            WHERE sender_id = $1 AND random_id = $6
         ), boxes AS (
            INSERT INTO message_boxes (owner_id, box_id, peer_user_id, body_id, out, reply_to_box_id, date)
            SELECT b.owner_id, b.box_id, b.peer_user_id, (SELECT id FROM body), b.out, b.reply_to, $3
            FROM UNNEST($7::bigint[], $8::bigint[], $9::bigint[], $10::bool[], $11::bigint[])
                AS b(owner_id, box_id, peer_user_id, out, reply_to)
         )
         SELECT id FROM body",
    )
    .bind(m.sender_id)
    .bind(&m.text)
    .bind(now)
    .bind(m.silent)
    .bind(m.noforwards)
    .bind(m.random_id)
    .bind(views.iter().map(|v| if v.out { m.sender_id } else { m.peer_user_id }).collect::<Vec<_>>())
    .bind(views.iter().map(|v| v.id).collect::<Vec<_>>())
    .bind(views.iter().map(|v| v.peer_user_id).collect::<Vec<_>>())
    .bind(views.iter().map(|v| v.out).collect::<Vec<_>>())
    .bind(views.iter().map(|v| v.reply_to_msg_id).collect::<Vec<_>>())
    .fetch_one(&mut *tx)
    .await?;

    let composed = compose(m, body_id, &box_ids, views);
    let ids = outbox.enqueue(&mut tx, &composed.rows).await?;
    tx.commit().await?;
    Ok(SendOutcome::Sent(composed.into_sent(ids)))
}

/// What one send of a group commit became.
pub enum GroupOutcome {
    Sent(Sent),
    /// Not for the shared transaction: its key was used before (a replay, or a reuse) or is
    /// repeated within the group, or it replies to a message. [`send`] takes it on its own.
    Alone,
}

/// Group commit: many sends in one transaction of two statements, whatever their number.
/// The first claims every key, each with a fresh body id, sees who blocked whom (primary
/// keys of idempotency_keys and blocks) and takes each owner's box ids at once (primary key
/// of box_sequences, owners ascending); the second writes the bodies, the boxes and the
/// outbox rows. Each statement is a round trip, and under load every round trip waits for
/// the backend and then for this task to be scheduled again, so their number, not the rows
/// they carry, is what a send's latency is made of.
///
/// Keys are claimed in ascending order and owners locked in ascending order, as [`send`]
/// does, so groups and single sends never deadlock on each other.
pub async fn send_many(
    pool: &PgPool,
    outbox: &Outbox,
    sends: &[NewMessage],
) -> Result<Vec<GroupOutcome>, sqlx::Error> {
    let mut outcomes: Vec<GroupOutcome> = sends.iter().map(|_| GroupOutcome::Alone).collect();
    // The first send of each key with no reply joins; the rest go alone.
    let mut keys = std::collections::HashSet::new();
    let joining: Vec<usize> = (0..sends.len())
        .filter(|&i| {
            let m = &sends[i];
            m.reply_to_msg_id == 0 && keys.insert((m.sender_id, m.random_id))
        })
        .collect();
    if joining.is_empty() {
        return Ok(outcomes);
    }
    let column = |f: &dyn Fn(&NewMessage) -> i64| {
        joining.iter().map(|&i| f(&sends[i])).collect::<Vec<i64>>()
    };
    let mut tx = pool.begin().await?;
    // (position in `joining` from 1, body id, an owner, its box id); no owner: a used key.
    let claims: Vec<(i64, i64, Option<i64>, Option<i64>)> = sqlx::query_as(
        "WITH s AS MATERIALIZED (
            SELECT u.*, nextval('message_bodies_id_seq') AS body_id
            FROM UNNEST($1::bigint[], $2::bigint[], $3::bytea[], $4::bigint[]) WITH ORDINALITY
                AS u(sender_id, random_id, request_hash, peer_user_id, n)
         ), claim AS (
            INSERT INTO idempotency_keys (sender_id, random_id, request_hash, body_id)
            SELECT sender_id, random_id, request_hash, body_id FROM s ORDER BY sender_id, random_id
            ON CONFLICT (sender_id, random_id) DO NOTHING
            RETURNING sender_id, random_id
         ), owners AS MATERIALIZED (
            SELECT s.n, o.owner_id
            FROM s JOIN claim c ON c.sender_id = s.sender_id AND c.random_id = s.random_id
            CROSS JOIN LATERAL (
                SELECT s.sender_id AS owner_id
                UNION ALL
                SELECT s.peer_user_id
                WHERE s.peer_user_id <> s.sender_id AND NOT EXISTS (
                    SELECT 1 FROM blocks b
                    WHERE b.owner_id = s.peer_user_id AND b.blocked_user_id = s.sender_id)
            ) o
         ), seq AS (
            INSERT INTO box_sequences (owner_id, last_box_id)
            SELECT owner_id, count(*) FROM owners GROUP BY owner_id ORDER BY owner_id
            ON CONFLICT (owner_id) DO UPDATE
                SET last_box_id = box_sequences.last_box_id + EXCLUDED.last_box_id
            RETURNING owner_id, last_box_id
         )
         SELECT s.n, s.body_id, o.owner_id,
                q.last_box_id - count(*) OVER (PARTITION BY o.owner_id)
                    + row_number() OVER (PARTITION BY o.owner_id ORDER BY o.n)
         FROM s LEFT JOIN owners o ON o.n = s.n LEFT JOIN seq q ON q.owner_id = o.owner_id
         ORDER BY s.n, o.owner_id",
    )
    .bind(column(&|m| m.sender_id))
    .bind(column(&|m| m.random_id))
    .bind(
        joining
            .iter()
            .map(|&i| sends[i].request_hash.as_slice())
            .collect::<Vec<_>>(),
    )
    .bind(column(&|m| m.peer_user_id))
    .fetch_all(&mut *tx)
    .await?;
    // (index into sends, body id, (owner, box id) in ascending owner order)
    let mut claimed: Vec<(usize, i64, BoxIds)> = Vec::with_capacity(joining.len());
    for (n, body_id, owner, box_id) in claims {
        let (Some(owner), Some(box_id)) = (owner, box_id) else {
            continue;
        };
        let i = usize::try_from(n - 1)
            .ok()
            .and_then(|at| joining.get(at).copied())
            .ok_or_else(|| sqlx::Error::Protocol(format!("no send at position {n}")))?;
        match claimed.last_mut() {
            Some((last, _, box_ids)) if *last == i => box_ids.push((owner, box_id)),
            _ => claimed.push((i, body_id, vec![(owner, box_id)])),
        }
    }
    if claimed.is_empty() {
        tx.commit().await?;
        return Ok(outcomes);
    }
    let now = chrono::Utc::now().timestamp();
    let mut bodies = BodyColumns::default();
    let mut boxes = BoxColumns::default();
    let mut composed = Vec::with_capacity(claimed.len());
    for (i, body_id, box_ids) in claimed {
        let m = &sends[i];
        let views = owner_views(m, &box_ids, now, 0, 0);
        bodies.push(body_id, m, now);
        for v in &views {
            boxes.push(v, m, body_id);
        }
        composed.push((i, compose(m, body_id, &box_ids, views)));
    }
    // Bodies, boxes and outbox rows in one statement; the keys already name their body.
    static WRITE: LazyLock<String> = LazyLock::new(|| {
        Staged::statement(
            "body AS (
                INSERT INTO message_bodies (id, sender_id, text, date, silent, noforwards)
                SELECT * FROM UNNEST($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bool[], $6::bool[])
             ), boxes AS (
                INSERT INTO message_boxes (owner_id, box_id, peer_user_id, body_id, out, date)
                SELECT * FROM UNNEST($7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bool[], $12::bigint[])
             )",
            13,
        )
    });
    let staged = outbox.stage(composed.iter().flat_map(|(_, c)| &c.rows));
    let query = sqlx::query_as(WRITE.as_str())
        .bind(&bodies.ids)
        .bind(&bodies.senders)
        .bind(&bodies.texts)
        .bind(&bodies.dates)
        .bind(&bodies.silent)
        .bind(&bodies.noforwards)
        .bind(&boxes.owners)
        .bind(&boxes.ids)
        .bind(&boxes.peers)
        .bind(&boxes.bodies)
        .bind(&boxes.out)
        .bind(&boxes.dates);
    let returned = staged.bind(query).fetch_all(&mut *tx).await?;
    let mut ids = staged.ids(returned)?.into_iter();
    tx.commit().await?;
    for (i, c) in composed {
        let mine = ids.by_ref().take(c.rows.len()).collect();
        outcomes[i] = GroupOutcome::Sent(c.into_sent(mine));
    }
    Ok(outcomes)
}

/// Each owner's box id of one message, owners ascending.
type BoxIds = Vec<(i64, i64)>;

/// The message_bodies rows of a group, as columns.
#[derive(Default)]
struct BodyColumns {
    ids: Vec<i64>,
    senders: Vec<i64>,
    texts: Vec<String>,
    dates: Vec<i64>,
    silent: Vec<bool>,
    noforwards: Vec<bool>,
}

impl BodyColumns {
    fn push(&mut self, id: i64, m: &NewMessage, date: i64) {
        self.ids.push(id);
        self.senders.push(m.sender_id);
        self.texts.push(m.text.clone());
        self.dates.push(date);
        self.silent.push(m.silent);
        self.noforwards.push(m.noforwards);
    }
}

/// The message_boxes rows of a group, as columns.
#[derive(Default)]
struct BoxColumns {
    owners: Vec<i64>,
    ids: Vec<i64>,
    peers: Vec<i64>,
    bodies: Vec<i64>,
    out: Vec<bool>,
    dates: Vec<i64>,
}

impl BoxColumns {
    fn push(&mut self, view: &Message, m: &NewMessage, body_id: i64) {
        self.owners.push(if view.out {
            m.sender_id
        } else {
            m.peer_user_id
        });
        self.ids.push(view.id);
        self.peers.push(view.peer_user_id);
        self.bodies.push(body_id);
        self.out.push(view.out);
        self.dates.push(view.date);
    }
}

/// Each owner's view of a new message, in `box_ids` order (owners ascending).
pub(crate) fn owner_views(
    m: &NewMessage,
    box_ids: &[(i64, i64)],
    now: i64,
    reply_box: i64,
    recipient_reply: i64,
) -> Vec<Message> {
    box_ids
        .iter()
        .map(|&(owner, box_id)| {
            let out = owner == m.sender_id;
            Message {
                id: box_id,
                peer_user_id: if out { m.peer_user_id } else { m.sender_id },
                from_user_id: m.sender_id,
                out,
                date: now,
                text: m.text.clone(),
                reply_to_msg_id: if out { reply_box } else { recipient_reply },
                silent: m.silent,
                noforwards: m.noforwards,
                edit_date: 0,
            }
        })
        .collect()
}

/// What a new message hands on: one event per owner for svc-updates (by the fast path), in
/// the trace of the request that sent it. svc-dialogs learns of it from the update log.
pub(crate) struct Composed {
    pub sender_message: Message,
    pub updates_events: Vec<UserEvent>,
    pub rows: Vec<NewRow>,
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

pub(crate) fn compose(
    m: &NewMessage,
    body_id: i64,
    box_ids: &[(i64, i64)],
    views: Vec<Message>,
) -> Composed {
    let mut sender_message = Message::default();
    let mut updates_events = Vec::with_capacity(views.len());
    let mut rows = Vec::with_capacity(views.len());
    for view in views {
        let owner = if view.out {
            m.sender_id
        } else {
            m.peer_user_id
        };
        let peer_box_id = box_ids
            .iter()
            .find(|(o, _)| *o != owner)
            .map_or(0, |(_, id)| *id);
        let event = new_message_event(body_id, owner, view.clone(), m.auth_key_id, peer_box_id);
        let (event_id, payload) = (new_message_event_id(body_id, owner), event.encode_to_vec());
        rows.push(NewRow {
            destination: TO_UPDATES,
            event_id,
            payload,
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

/// Blocks (`true`) or unblocks a user; idempotent.
pub async fn set_blocked(
    pool: &PgPool,
    owner: i64,
    user: i64,
    blocked: bool,
) -> Result<(), sqlx::Error> {
    let sql = if blocked {
        "INSERT INTO blocks (owner_id, blocked_user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING"
    } else {
        "DELETE FROM blocks WHERE owner_id = $1 AND blocked_user_id = $2"
    };
    sqlx::query(sql)
        .bind(owner)
        .bind(user)
        .execute(pool)
        .await?;
    Ok(())
}

/// Blocked users after `after`, ascending (primary key of blocks).
pub async fn blocked(
    pool: &PgPool,
    owner: i64,
    after: i64,
    limit: i32,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT blocked_user_id FROM blocks WHERE owner_id = $1 AND blocked_user_id > $2
         ORDER BY blocked_user_id LIMIT $3",
    )
    .bind(owner)
    .bind(after)
    .bind(limit as i64)
    .fetch_all(pool)
    .await
}

/// The box id `owner` has for `body_id` (index message_boxes_body).
async fn box_id_of_body(
    tx: &mut PgConnection,
    owner: i64,
    body_id: i64,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT box_id FROM message_boxes WHERE owner_id = $1 AND body_id = $2")
        .bind(owner)
        .bind(body_id)
        .fetch_optional(tx)
        .await
}

async fn box_of_body(
    tx: &mut PgConnection,
    owner: i64,
    body_id: i64,
) -> Result<Message, sqlx::Error> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {MESSAGE_COLUMNS} FROM message_boxes b JOIN message_bodies m ON m.id = b.body_id
         WHERE b.owner_id = $1 AND b.body_id = $2"
    )))
    .bind(owner)
    .bind(body_id)
    .fetch_one(tx)
    .await?;
    message_from_row(&row)
}

/// A history window, checked and clamped at the boundary.
pub struct HistoryWindow {
    pub owner: i64,
    pub peer: i64,
    /// The anchor: messages with ids below it are "older" (0 = no id anchor).
    pub offset_id: i64,
    /// With no id anchor: messages sent before this date are "older" (0 = from the newest).
    pub offset_date: i64,
    /// The window's start relative to the anchor, in [-100, 100]: negative reaches newer messages.
    pub add_offset: i32,
    /// In 1..=100.
    pub limit: i32,
    /// Keep ids strictly below (0 = no bound).
    pub max_id: i64,
    /// Keep ids strictly above (0 = no bound).
    pub min_id: i64,
}

/// The MTProto history window, newest first. Both parts seek on index message_boxes_history
/// (no SQL OFFSET): the messages at or after the anchor ascending from it, those before it
/// descending; `add_offset` only moves the window within at most 100 rows of the anchor.
pub async fn history(pool: &PgPool, w: &HistoryWindow) -> Result<Vec<Message>, sqlx::Error> {
    // (id, date) bounds of "older than the anchor"; i64::MAX = unbounded.
    let (anchor_id, anchor_date) = match (w.offset_id, w.offset_date) {
        (0, 0) => (i64::MAX, i64::MAX),
        (0, date) => (i64::MAX, date),
        (id, _) => (id, i64::MAX),
    };
    let has_anchor = anchor_id != i64::MAX || anchor_date != i64::MAX;
    let upper = if w.max_id > 0 { w.max_id } else { i64::MAX };
    let lower = w.min_id.max(0);
    let (s, limit) = (w.add_offset as i64, w.limit as i64);

    // At or after the anchor: the k-th closest (k from 0) is in the window when
    // -(s + limit) <= k < -s.
    let mut window = Vec::new();
    if s < 0 && has_anchor {
        static AT_OR_AFTER: LazyLock<String> = LazyLock::new(|| {
            with_bodies(
                &format!(
                    "SELECT {BOX_COLUMNS} FROM message_boxes
                     WHERE owner_id = $1 AND peer_user_id = $2 AND NOT deleted
                       AND box_id >= $3 AND date >= $4 AND box_id < $5 AND box_id > $6
                     ORDER BY box_id ASC LIMIT $7"
                ),
                "ASC",
            )
        });
        let rows = sqlx::query(AT_OR_AFTER.as_str())
            .bind(w.owner)
            .bind(w.peer)
            .bind(if anchor_id == i64::MAX { 0 } else { anchor_id })
            .bind(if anchor_date == i64::MAX {
                0
            } else {
                anchor_date
            })
            .bind(upper)
            .bind(lower)
            .bind(-s)
            .fetch_all(pool)
            .await?;
        let skip = (-(s + limit)).max(0) as usize;
        window = rows
            .iter()
            .skip(skip)
            .map(message_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        window.reverse();
    }
    // Before the anchor: the j-th (from 0) is in the window when max(0, s) <= j < s + limit.
    let older_end = s + limit;
    if older_end > 0 {
        static BEFORE: LazyLock<String> = LazyLock::new(|| {
            with_bodies(
                &format!(
                    "SELECT {BOX_COLUMNS} FROM message_boxes
                     WHERE owner_id = $1 AND peer_user_id = $2 AND NOT deleted
                       AND box_id < $3 AND date < $4 AND box_id < $5 AND box_id > $6
                     ORDER BY box_id DESC LIMIT $7"
                ),
                "DESC",
            )
        });
        let rows = sqlx::query(BEFORE.as_str())
            .bind(w.owner)
            .bind(w.peer)
            .bind(anchor_id)
            .bind(anchor_date)
            .bind(upper)
            .bind(lower)
            .bind(older_end)
            .fetch_all(pool)
            .await?;
        for row in rows.iter().skip(s.max(0) as usize) {
            window.push(message_from_row(row)?);
        }
    }
    Ok(window)
}

/// The owner's messages with these ids, in their current state: one probe of the primary key of
/// message_boxes per distinct id (a scan of the owner's boxes filtered by the ids would grow
/// with her whole history), then one of message_bodies.
pub async fn by_ids(pool: &PgPool, owner: i64, ids: &[i64]) -> Result<Vec<Message>, sqlx::Error> {
    static BY_IDS: LazyLock<String> = LazyLock::new(|| {
        with_bodies(
            &format!(
                "SELECT hit.* FROM (SELECT DISTINCT unnest($2::bigint[]) AS box_id) wanted
                 CROSS JOIN LATERAL (
                     SELECT {BOX_COLUMNS} FROM message_boxes
                     WHERE owner_id = $1 AND box_id = wanted.box_id AND NOT deleted LIMIT 1
                 ) hit"
            ),
            "ASC",
        )
    });
    let rows = sqlx::query(BY_IDS.as_str())
        .bind(owner)
        .bind(ids)
        .fetch_all(pool)
        .await?;
    rows.iter().map(message_from_row).collect()
}
