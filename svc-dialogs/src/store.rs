//! The SQL of dialogs' pages, receipts (DELIVERED) and watermarks.

use oxigram_outbox::Outbox;
use oxigram_proto::{
    dialogs::v1::Dialog,
    types::v1::{Update, UpdateDeliveredOutbox, UserEvent, update},
};
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use crate::outbound;

/// Most peers one receipt reports to; older gaps are left to later receipts.
pub const MAX_RECEIPT_PEERS: i64 = 1000;

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
        ..Default::default()
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
            Ok(outbound::row(id, e))
        })
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    outbox.enqueue(tx, &rows).await
}

/// The sender-side watermarks of a dialog, which only ever move forward.
pub(crate) enum Watermark {
    ReadOutbox,
    DeliveredOutbox,
}

/// Moves `owner`'s watermark in the dialog with `peer` up to `max_id`; `true` when it moved
/// (primary key of dialogs). The dialog row is created when the owner's own new-message
/// events have not been applied yet, so a read or receipt that overtakes them is kept.
pub(crate) async fn advance(
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

/// What a receipt changed: the events to hand off now and their outbox rows.
pub struct Moved {
    pub events: Vec<UserEvent>,
    pub rows: Vec<i64>,
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
