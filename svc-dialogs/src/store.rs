//! The SQL of dialogs: applying message events, reads (READ), receipts (DELIVERED), pages.

use std::collections::BTreeMap;

use oxigram_kit::to_updates::TO_UPDATES;
use oxigram_outbox::{NewRow, Outbox};
use oxigram_proto::{
    internal::v1::Dialog,
    types::v1::{
        Update, UpdateDeliveredOutbox, UpdateReadHistoryInbox, UpdateReadHistoryOutbox, UserEvent,
        update,
    },
};
use prost::Message as _;
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

/// Most peers one receipt reports to; older gaps are left to later receipts.
pub const MAX_RECEIPT_PEERS: i64 = 1000;

/// Applies events once each (the inbox skips replays); returns how many were new. A batch
/// costs the same two statements whatever its size: record the event ids; then, in one
/// statement, record the incoming messages and move each dialog's top message and unread
/// count once (creating the dialogs that are missing).
pub async fn apply(pool: &PgPool, events: Vec<(Uuid, UserEvent)>) -> Result<i32, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let ids: Vec<Uuid> = events.iter().map(|(id, _)| *id).collect();
    let fresh = oxigram_outbox::first_deliveries(&mut tx, &ids).await?;
    let applied = fresh.len() as i32;
    // (owner, peer) → (top id, its date); incoming messages as (owner, peer, id, peer's id).
    let mut tops: BTreeMap<(i64, i64), (i64, i64)> = BTreeMap::new();
    let mut incoming: Vec<(i64, i64, i64, i64)> = Vec::new();
    for (event_id, event) in events {
        if !fresh.contains(&event_id) {
            continue;
        }
        let Some(update::Kind::NewMessage(new)) = event.update.and_then(|u| u.kind) else {
            continue;
        };
        let Some(m) = new.message else { continue };
        let top = tops
            .entry((event.user_id, m.peer_user_id))
            .or_insert((0, 0));
        if m.id > top.0 {
            *top = (m.id, m.date);
        }
        if !m.out {
            incoming.push((event.user_id, m.peer_user_id, m.id, event.peer_box_id));
        }
    }
    if tops.is_empty() {
        tx.commit().await?;
        return Ok(applied);
    }
    // Primary key of dialog_incoming: a message already recorded does not count twice. The
    // dialogs are upserted in key order, so batches and reads (which lock in the same order)
    // never deadlock, and by primary key (an UPDATE … FROM UNNEST would hash-join a scan of
    // every partition). A dialog's update arm works on its latest version, after any read
    // that held it: a message counts as unread only above the watermark that read left.
    static APPLY: &str = "WITH arrived AS (
            INSERT INTO dialog_incoming (owner_id, peer_user_id, box_id, peer_box_id)
            SELECT * FROM UNNEST($5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
            ON CONFLICT DO NOTHING RETURNING owner_id, peer_user_id, box_id
         )
         INSERT INTO dialogs AS d (owner_id, peer_user_id, top_message_id, top_message_date, unread_count)
         SELECT t.owner_id, t.peer_user_id, t.top_id, t.top_date,
                (SELECT count(*) FROM arrived a
                 WHERE a.owner_id = t.owner_id AND a.peer_user_id = t.peer_user_id)::int
         FROM UNNEST($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[])
             AS t(owner_id, peer_user_id, top_id, top_date)
         ORDER BY 1, 2
         ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET
            top_message_id = GREATEST(d.top_message_id, EXCLUDED.top_message_id),
            top_message_date = CASE WHEN EXCLUDED.top_message_id > d.top_message_id
                THEN EXCLUDED.top_message_date ELSE d.top_message_date END,
            unread_count = d.unread_count + (SELECT count(*) FROM arrived a
                WHERE a.owner_id = d.owner_id AND a.peer_user_id = d.peer_user_id
                  AND a.box_id > d.read_inbox_max_id)::int";
    let column = |f: fn(&(i64, i64, i64, i64)) -> i64| incoming.iter().map(f).collect::<Vec<_>>();
    sqlx::query(APPLY)
        .bind(tops.keys().map(|k| k.0).collect::<Vec<_>>())
        .bind(tops.keys().map(|k| k.1).collect::<Vec<_>>())
        .bind(tops.values().map(|v| v.0).collect::<Vec<_>>())
        .bind(tops.values().map(|v| v.1).collect::<Vec<_>>())
        .bind(column(|i| i.0))
        .bind(column(|i| i.1))
        .bind(column(|i| i.2))
        .bind(column(|i| i.3))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(applied)
}

/// One page of dialogs after the seek key, newest first (index dialogs_order).
pub async fn page(
    pool: &PgPool,
    owner: i64,
    after: (i64, i64, i64),
    limit: i32,
) -> Result<Vec<Dialog>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT peer_user_id, top_message_id, top_message_date, read_inbox_max_id,
                read_outbox_max_id, unread_count, delivered_outbox_max_id
         FROM dialogs
         WHERE owner_id = $1 AND (top_message_date, top_message_id, peer_user_id) < ($2, $3, $4)
           AND top_message_id > 0
         ORDER BY top_message_date DESC, top_message_id DESC, peer_user_id DESC
         LIMIT $5",
    )
    .bind(owner)
    .bind(after.0)
    .bind(after.1)
    .bind(after.2)
    .bind(limit as i64)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(Dialog {
                peer_user_id: r.try_get("peer_user_id")?,
                top_message_id: r.try_get("top_message_id")?,
                top_message_date: r.try_get("top_message_date")?,
                read_inbox_max_id: r.try_get("read_inbox_max_id")?,
                read_outbox_max_id: r.try_get("read_outbox_max_id")?,
                unread_count: r.try_get("unread_count")?,
                delivered_outbox_max_id: r.try_get("delivered_outbox_max_id")?,
            })
        })
        .collect()
}

fn event(user_id: i64, kind: update::Kind, origin_auth_key_id: i64) -> UserEvent {
    UserEvent {
        event_id: Uuid::new_v4().to_string(),
        user_id,
        pts_count: 1,
        date: chrono::Utc::now().timestamp(),
        update: Some(Update { kind: Some(kind) }),
        origin_auth_key_id,
        peer_box_id: 0,
    }
}

/// Writes events for svc-updates into the outbox (fast path first); returns their rows.
async fn enqueue(
    tx: &mut PgConnection,
    outbox: &Outbox,
    events: &[UserEvent],
) -> Result<Vec<i64>, sqlx::Error> {
    let rows = events
        .iter()
        .map(|e| {
            let id =
                Uuid::parse_str(&e.event_id).map_err(|err| sqlx::Error::Decode(Box::new(err)))?;
            Ok(NewRow::new(TO_UPDATES, id, e.encode_to_vec()))
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    outbox.enqueue(tx, &rows).await
}

/// The sender-side watermarks of a dialog, which only ever move forward.
enum Watermark {
    ReadOutbox,
    DeliveredOutbox,
}

/// Moves `owner`'s watermark in the dialog with `peer` up to `max_id`; `true` when it moved
/// (primary key of dialogs). The dialog row is created when the owner's own new-message
/// events have not been applied yet, so a read or receipt that overtakes them is kept.
async fn advance(
    tx: &mut PgConnection,
    watermark: Watermark,
    owner: i64,
    peer: i64,
    max_id: i64,
) -> Result<bool, sqlx::Error> {
    let sql = match watermark {
        Watermark::ReadOutbox => {
            "INSERT INTO dialogs (owner_id, peer_user_id, read_outbox_max_id) VALUES ($1, $2, $3)
             ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET read_outbox_max_id = $3
             WHERE dialogs.read_outbox_max_id < $3"
        }
        Watermark::DeliveredOutbox => {
            "INSERT INTO dialogs (owner_id, peer_user_id, delivered_outbox_max_id) VALUES ($1, $2, $3)
             ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET delivered_outbox_max_id = $3
             WHERE dialogs.delivered_outbox_max_id < $3"
        }
    };
    let moved = sqlx::query(sql)
        .bind(owner)
        .bind(peer)
        .bind(max_id)
        .execute(tx)
        .await?
        .rows_affected();
    Ok(moved == 1)
}

/// What a read changed: the events to hand off now and their outbox rows.
pub struct Moved {
    pub events: Vec<UserEvent>,
    pub rows: Vec<i64>,
}

/// READ: moves the reader's inbox watermark up to `max_id` (0 = the top message), recounts her
/// unread messages, and moves the peer's outbox watermark to the same message in the peer's
/// own ids. `None` when the watermark would not advance: a repeat changes nothing.
pub async fn read_history(
    pool: &PgPool,
    outbox: &Outbox,
    owner: i64,
    peer: i64,
    max_id: i64,
    auth_key_id: i64,
) -> Result<Option<Moved>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    // Locks both sides of the dialog in key order (as apply does): reads and new messages of
    // it serialise here and never deadlock.
    sqlx::query(
        "SELECT 1 FROM dialogs WHERE (owner_id, peer_user_id) IN (($1, $2), ($2, $1))
         ORDER BY owner_id, peer_user_id FOR UPDATE",
    )
    .bind(owner)
    .bind(peer)
    .execute(&mut *tx)
    .await?;
    let Some(row) = sqlx::query(
        "SELECT read_inbox_max_id, top_message_id FROM dialogs
         WHERE owner_id = $1 AND peer_user_id = $2 FOR UPDATE",
    )
    .bind(owner)
    .bind(peer)
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(None);
    };
    let (read, top): (i64, i64) = (
        row.try_get("read_inbox_max_id")?,
        row.try_get("top_message_id")?,
    );
    let target = if max_id == 0 { top } else { max_id.min(top) };
    if target <= read {
        return Ok(None);
    }
    // Primary key of dialog_incoming, both.
    let still_unread: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM dialog_incoming WHERE owner_id = $1 AND peer_user_id = $2 AND box_id > $3",
    )
    .bind(owner)
    .bind(peer)
    .bind(target)
    .fetch_one(&mut *tx)
    .await?;
    let peer_max: Option<i64> = sqlx::query_scalar(
        "SELECT max(peer_box_id) FROM dialog_incoming
         WHERE owner_id = $1 AND peer_user_id = $2 AND box_id > $3 AND box_id <= $4",
    )
    .bind(owner)
    .bind(peer)
    .bind(read)
    .bind(target)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE dialogs SET read_inbox_max_id = $3, unread_count = $4
         WHERE owner_id = $1 AND peer_user_id = $2",
    )
    .bind(owner)
    .bind(peer)
    .bind(target)
    .bind(still_unread as i32)
    .execute(&mut *tx)
    .await?;
    let mut events = vec![event(
        owner,
        update::Kind::ReadHistoryInbox(UpdateReadHistoryInbox {
            peer_user_id: peer,
            max_id: target,
            still_unread_count: still_unread as i32,
        }),
        auth_key_id,
    )];
    // The sender's outbox watermark moves only when her messages were actually read.
    if let Some(peer_max) = peer_max.filter(|id| *id > 0 && peer != owner) {
        let moved = advance(&mut tx, Watermark::ReadOutbox, peer, owner, peer_max).await?;
        if moved {
            sqlx::query(
                "INSERT INTO outbox_reads (owner_id, peer_user_id, max_id, read_at)
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .bind(peer)
            .bind(owner)
            .bind(peer_max)
            .bind(chrono::Utc::now().timestamp())
            .execute(&mut *tx)
            .await?;
            events.push(event(
                peer,
                update::Kind::ReadHistoryOutbox(UpdateReadHistoryOutbox {
                    peer_user_id: owner,
                    max_id: peer_max,
                }),
                0,
            ));
        }
    }
    let rows = enqueue(&mut tx, outbox, &events).await?;
    tx.commit().await?;
    Ok(Some(Moved { events, rows }))
}

/// When the peer first read our message `msg_id` (primary key of outbox_reads).
pub async fn outbox_read_date(
    pool: &PgPool,
    owner: i64,
    peer: i64,
    msg_id: i64,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT min(read_at) FROM outbox_reads WHERE owner_id = $1 AND peer_user_id = $2 AND max_id >= $3",
    )
    .bind(owner)
    .bind(peer)
    .bind(msg_id)
    .fetch_one(pool)
    .await
}

/// DELIVERED: one device of `owner` stored every message up to `max_id`. Kept per device;
/// the first device to store a message tells its sender, in the sender's own ids. Returns the
/// device's watermark and the events for the senders.
pub async fn received(
    pool: &PgPool,
    outbox: &Outbox,
    owner: i64,
    auth_key_id: i64,
    max_id: i64,
) -> Result<(i64, Option<Moved>), sqlx::Error> {
    let mut tx = pool.begin().await?;
    // The user-level watermark before this receipt: the highest over her devices.
    // Locks the owner's receipt rows (primary key prefix) so receipts of one user serialise.
    let before: Vec<(i64, i64)> = sqlx::query(
        "SELECT auth_key_id, max_id FROM device_receipts WHERE owner_id = $1 FOR UPDATE",
    )
    .bind(owner)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|r| Ok((r.try_get("auth_key_id")?, r.try_get("max_id")?)))
    .collect::<Result<_, sqlx::Error>>()?;
    let user_before = before.iter().map(|(_, m)| *m).max().unwrap_or(0);
    let device_before = before
        .iter()
        .find(|(k, _)| *k == auth_key_id)
        .map_or(0, |(_, m)| *m);
    // Never past what the owner has received (index dialog_incoming_by_box).
    let top: Option<i64> =
        sqlx::query_scalar("SELECT max(box_id) FROM dialog_incoming WHERE owner_id = $1")
            .bind(owner)
            .fetch_one(&mut *tx)
            .await?;
    let target = max_id.min(top.unwrap_or(0));
    if target <= device_before {
        return Ok((device_before, None));
    }
    sqlx::query(
        "INSERT INTO device_receipts (owner_id, auth_key_id, max_id) VALUES ($1, $2, $3)
         ON CONFLICT (owner_id, auth_key_id) DO UPDATE SET max_id = EXCLUDED.max_id, updated_at = now()",
    )
    .bind(owner)
    .bind(auth_key_id)
    .bind(target)
    .execute(&mut *tx)
    .await?;
    let mut events = Vec::new();
    if target > user_before {
        let peers = sqlx::query(
            "SELECT peer_user_id, max(peer_box_id) AS peer_max FROM dialog_incoming
             WHERE owner_id = $1 AND box_id > $2 AND box_id <= $3
             GROUP BY peer_user_id ORDER BY peer_user_id LIMIT $4",
        )
        .bind(owner)
        .bind(user_before)
        .bind(target)
        .bind(MAX_RECEIPT_PEERS)
        .fetch_all(&mut *tx)
        .await?;
        for p in peers {
            let (peer, peer_max): (i64, i64) = (p.try_get("peer_user_id")?, p.try_get("peer_max")?);
            let moved = advance(&mut tx, Watermark::DeliveredOutbox, peer, owner, peer_max).await?;
            if moved {
                events.push(event(
                    peer,
                    update::Kind::DeliveredOutbox(UpdateDeliveredOutbox {
                        peer_user_id: owner,
                        max_id: peer_max,
                    }),
                    0,
                ));
            }
        }
    }
    let rows = enqueue(&mut tx, outbox, &events).await?;
    tx.commit().await?;
    Ok((
        target,
        (!events.is_empty()).then_some(Moved { events, rows }),
    ))
}
