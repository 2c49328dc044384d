//! The SQL of dialogs.

use oxigram_proto::{
    internal::v1::Dialog,
    types::v1::{UserEvent, update},
};
use sqlx::{PgPool, Row};
use uuid::Uuid;

/// Applies events once each (the inbox skips replays); returns how many were new.
pub async fn apply(pool: &PgPool, mut events: Vec<(Uuid, UserEvent)>) -> Result<i32, sqlx::Error> {
    // A fixed order keeps concurrent batches from deadlocking on the same rows.
    events.sort_by_key(|(id, e)| (e.user_id, *id));
    let mut tx = pool.begin().await?;
    let mut applied = 0;
    for (event_id, event) in events {
        if !oxigram_outbox::first_delivery(&mut tx, event_id).await? {
            continue;
        }
        applied += 1;
        let Some(kind) = event.update.and_then(|u| u.kind) else {
            continue;
        };
        match kind {
            update::Kind::NewMessage(new) => {
                let Some(m) = new.message else { continue };
                // Primary key of dialogs.
                sqlx::query(
                    "INSERT INTO dialogs (owner_id, peer_user_id, top_message_id, top_message_date, unread_count)
                     VALUES ($1, $2, $3, $4, CASE WHEN $5 THEN 0 ELSE 1 END)
                     ON CONFLICT (owner_id, peer_user_id) DO UPDATE SET
                        top_message_date = CASE WHEN EXCLUDED.top_message_id > dialogs.top_message_id
                                           THEN EXCLUDED.top_message_date ELSE dialogs.top_message_date END,
                        top_message_id = GREATEST(dialogs.top_message_id, EXCLUDED.top_message_id),
                        unread_count = dialogs.unread_count
                            + CASE WHEN $5 OR $3 <= dialogs.read_inbox_max_id THEN 0 ELSE 1 END",
                )
                .bind(event.user_id)
                .bind(m.peer_user_id)
                .bind(m.id)
                .bind(m.date)
                .bind(m.out)
                .execute(&mut *tx)
                .await?;
            }
            update::Kind::ReadHistoryInbox(_) | update::Kind::ReadHistoryOutbox(_) => {}
        }
    }
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
                read_outbox_max_id, unread_count
         FROM dialogs
         WHERE owner_id = $1 AND (top_message_date, top_message_id, peer_user_id) < ($2, $3, $4)
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
            })
        })
        .collect()
}
