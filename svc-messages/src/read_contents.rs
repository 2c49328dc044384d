//! The read-contents transaction: the caller played voice or video notes she received. Her
//! boxes of them stop being media_unread, and so do the senders' boxes of the same messages
//! (a sent note shows unplayed until its recipient plays it). Every owner whose boxes changed
//! gets one event in her update log naming her own box ids, written to the outbox for
//! svc-updates in the same transaction. Nothing changes, and no event is written, for boxes
//! already played: a repeat moves no pts.

use std::collections::BTreeMap;

use oxigram_outbox::{NewRow, Outbox};
use oxigram_proto::types::v1::{Update, UpdateReadMessageContents, UserEvent, update};
use prost::Message as _;
use sqlx::PgPool;
use uuid::Uuid;

use crate::outbound::TO_UPDATES;

/// A read of contents that passed validation.
pub struct ReadContents {
    pub owner_id: i64,
    /// The reading device, which has the result already and gets no push.
    pub auth_key_id: i64,
    /// The caller's box ids, positive.
    pub ids: Vec<i64>,
    /// The trace of the request: the events continue it.
    pub traceparent: Option<String>,
}

/// A committed read: the events written (the caller's first) and their outbox rows; both empty
/// when nothing changed.
#[derive(Default)]
pub struct ContentsRead {
    pub updates_events: Vec<UserEvent>,
    /// The outbox ids of the events for svc-updates.
    pub updates_rows: Vec<i64>,
}

/// A box the read changed (sql/read_contents_clear.sql).
#[derive(sqlx::FromRow)]
struct Played {
    owner_id: i64,
    box_id: i64,
}

/// Marks what `read` names played, in one transaction.
pub async fn read_contents(
    pool: &PgPool,
    outbox: &Outbox,
    read: &ReadContents,
) -> Result<ContentsRead, sqlx::Error> {
    if read.ids.is_empty() {
        return Ok(ContentsRead::default());
    }
    let mut tx = pool.begin().await?;
    let played: Vec<Played> = sqlx::query_as(include_str!("../sql/read_contents_clear.sql"))
        .bind(read.owner_id)
        .bind(&read.ids)
        .fetch_all(&mut *tx)
        .await?;
    if played.is_empty() {
        return Ok(ContentsRead::default());
    }
    let mut by_owner: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for p in played {
        by_owner.entry(p.owner_id).or_default().push(p.box_id);
    }
    // The caller's event first: her answer's pts is its.
    let mut owners: Vec<(i64, Vec<i64>)> = by_owner.into_iter().collect();
    owners.sort_by_key(|(owner, _)| *owner != read.owner_id);

    let date = chrono::Utc::now().timestamp();
    let (mut events, mut rows) = (Vec::new(), Vec::new());
    for (owner, messages) in owners {
        // Each read is its own fact: the same boxes can only be played once, but an id fixed
        // here is what the relay and the fast path both hand on, so svc-updates logs it once.
        let event_id = Uuid::new_v4();
        let event = UserEvent {
            event_id: event_id.to_string(),
            user_id: owner,
            pts_count: 1,
            date,
            update: Some(Update {
                kind: Some(update::Kind::ReadMessageContents(
                    UpdateReadMessageContents { messages, date },
                )),
            }),
            origin_auth_key_id: if owner == read.owner_id {
                read.auth_key_id
            } else {
                0
            },
            peer_box_id: 0,
            pts: 0,
            deletions: Vec::new(),
            unread_reactions_delta: 0,
        };
        rows.push(NewRow {
            destination: TO_UPDATES,
            event_id,
            payload: event.encode_to_vec(),
            traceparent: read.traceparent.clone(),
        });
        events.push(event);
    }
    let updates_rows = outbox.enqueue(&mut tx, &rows).await?;
    tx.commit().await?;
    Ok(ContentsRead {
        updates_events: events,
        updates_rows,
    })
}
