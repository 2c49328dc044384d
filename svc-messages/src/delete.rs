//! The delete transaction: messages leave their owner's box (DeleteMessages), or a dialog is
//! cleared newest first in bounded batches (DeleteHistory). A box is only marked deleted: the
//! body is shared and the box keeps its place among the owner's ids. With revoke the other
//! owner's box of each body goes too. Every owner who lost boxes gets one delete event in her
//! update log, naming her own box ids (`pts_count` = their number), written to the outbox
//! for svc-updates in the same transaction. The event also tells svc-dialogs, which keeps no
//! messages, what it needs to keep the dialog exact: the deleted incoming ids, the newest box
//! left and the boundary that top holds for (see `DialogDeletion` in types.proto).

use std::collections::{BTreeMap, BTreeSet};

use oxigram_outbox::{NewRow, Outbox};
use oxigram_proto::types::v1::{DialogDeletion, Update, UpdateDeleteMessages, UserEvent, update};
use prost::Message as _;
use sqlx::{PgConnection, PgPool};

use crate::outbound::{TO_UPDATES, delete_event_id};

/// Most boxes one DeleteHistory call deletes in the caller's box, and most ids one
/// DeleteMessages call may name: one delete event stays bounded.
pub const MAX_DELETE_BATCH: usize = 1000;

/// What to delete in the owner's box.
pub enum Targets {
    /// These box ids (checked: positive, at most `MAX_DELETE_BATCH`).
    Ids(Vec<i64>),
    /// The newest boxes of the dialog with `peer`, ids up to `max_id` (i64::MAX: all).
    History {
        peer: i64,
        max_id: i64,
        just_clear: bool,
    },
}

/// A delete that passed validation.
pub struct Delete {
    pub owner_id: i64,
    /// The deleting device, which has the result already and gets no push.
    pub auth_key_id: i64,
    pub targets: Targets,
    /// Also the other owner's box of each message.
    pub revoke: bool,
    /// The trace of the request: the events continue it.
    pub traceparent: Option<String>,
}

/// A committed delete: the events written (the caller's first, when she lost any box) and
/// their outbox rows.
#[derive(Default)]
pub struct Deleted {
    pub updates_events: Vec<UserEvent>,
    /// The outbox ids of the events for svc-updates.
    pub updates_rows: Vec<i64>,
    /// DeleteHistory: more of the dialog is left to delete after this batch.
    pub more: bool,
}

/// What a delete became. `Forbidden` changed nothing.
pub enum DeleteOutcome {
    Deleted(Deleted),
    /// A revoke would reach the box of a user who blocked the caller.
    Forbidden,
}

/// A box the caller asked to delete (sql/delete_targets.sql, sql/delete_history_targets.sql).
#[derive(sqlx::FromRow)]
struct Target {
    box_id: i64,
    peer_user_id: i64,
    body_id: i64,
    /// The peer blocked the caller.
    blocked: bool,
}

/// A box a delete marked (sql/delete_mark.sql).
#[derive(sqlx::FromRow)]
struct Marked {
    box_id: i64,
    peer_user_id: i64,
    out: bool,
    reaction_unread: bool,
}

/// The newest box left in a dialog (sql/delete_tops.sql).
#[derive(sqlx::FromRow)]
struct Top {
    owner_id: i64,
    peer_user_id: i64,
    top_id: i64,
    top_date: i64,
}

/// Deletes what `delete` names, in one transaction.
pub async fn delete(
    pool: &PgPool,
    outbox: &Outbox,
    delete: &Delete,
) -> Result<DeleteOutcome, sqlx::Error> {
    let owner = delete.owner_id;
    let mut tx = pool.begin().await?;
    let (mut targets, remove_empty): (Vec<Target>, bool) = match &delete.targets {
        Targets::Ids(ids) => {
            let targets = sqlx::query_as(include_str!("../sql/delete_targets.sql"))
                .bind(owner)
                .bind(ids)
                .fetch_all(&mut *tx)
                .await?;
            (targets, true)
        }
        Targets::History {
            peer,
            max_id,
            just_clear,
        } => {
            let targets = sqlx::query_as(include_str!("../sql/delete_history_targets.sql"))
                .bind(owner)
                .bind(peer)
                .bind(max_id)
                // One more than a batch: whether more is left after it.
                .bind(MAX_DELETE_BATCH as i64 + 1)
                .fetch_all(&mut *tx)
                .await?;
            (targets, !just_clear)
        }
    };
    let more = targets.len() > MAX_DELETE_BATCH;
    targets.truncate(MAX_DELETE_BATCH);
    if targets.is_empty() {
        return Ok(DeleteOutcome::Deleted(Deleted::default()));
    }
    if delete.revoke && targets.iter().any(|t| t.blocked) {
        return Ok(DeleteOutcome::Forbidden);
    }

    // The other owners a revoke reaches, with the bodies of theirs it deletes.
    let mut others: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    if delete.revoke {
        for t in targets.iter().filter(|t| t.peer_user_id != owner) {
            others.entry(t.peer_user_id).or_default().push(t.body_id);
        }
    }
    let owners: Vec<i64> = std::iter::once(owner)
        .chain(others.keys().copied())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let boundaries: BTreeMap<i64, i64> = sqlx::query_as(include_str!("../sql/delete_lock.sql"))
        .bind(&owners)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();

    // Each owner's boxes to mark: the caller's targets, and the other owners' boxes of the
    // same bodies.
    let mut boxes: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    boxes.insert(owner, targets.iter().map(|t| t.box_id).collect());
    if !others.is_empty() {
        let (peer_owners, bodies): (Vec<i64>, Vec<i64>) = others
            .iter()
            .flat_map(|(o, bodies)| bodies.iter().map(move |b| (*o, *b)))
            .unzip();
        let found: Vec<(i64, i64)> = sqlx::query_as(include_str!("../sql/delete_peer_boxes.sql"))
            .bind(&peer_owners)
            .bind(&bodies)
            .fetch_all(&mut *tx)
            .await?;
        for (o, box_id) in found {
            boxes.entry(o).or_default().push(box_id);
        }
    }

    let mut marked: BTreeMap<i64, Vec<Marked>> = BTreeMap::new();
    for (o, ids) in &boxes {
        let rows: Vec<Marked> = mark(&mut tx, *o, ids).await?;
        if !rows.is_empty() {
            marked.insert(*o, rows);
        }
    }
    if marked.is_empty() {
        tx.commit().await?;
        return Ok(DeleteOutcome::Deleted(Deleted {
            more,
            ..Deleted::default()
        }));
    }

    // The dialogs touched, and the newest box each has left.
    let dialogs: BTreeSet<(i64, i64)> = marked
        .iter()
        .flat_map(|(o, rows)| rows.iter().map(move |r| (*o, r.peer_user_id)))
        .collect();
    let (dialog_owners, dialog_peers): (Vec<i64>, Vec<i64>) = dialogs.iter().copied().unzip();
    let tops: Vec<Top> = sqlx::query_as(include_str!("../sql/delete_tops.sql"))
        .bind(&dialog_owners)
        .bind(&dialog_peers)
        .fetch_all(&mut *tx)
        .await?;
    let tops: BTreeMap<(i64, i64), (i64, i64)> = tops
        .into_iter()
        .map(|t| ((t.owner_id, t.peer_user_id), (t.top_id, t.top_date)))
        .collect();

    let date = chrono::Utc::now().timestamp();
    let (mut events, mut rows) = (Vec::new(), Vec::new());
    // The caller's event first: the fast path answers with its pts.
    let order = std::iter::once(owner).chain(marked.keys().copied().filter(|o| *o != owner));
    for o in order {
        let Some(deleted) = marked.get(&o) else {
            continue;
        };
        let mut ids: Vec<i64> = deleted.iter().map(|m| m.box_id).collect();
        ids.sort_unstable();
        // Per dialog: the incoming boxes deleted, and how many deleted boxes held an unread
        // reaction.
        let mut incoming: BTreeMap<i64, (Vec<i64>, i32)> = BTreeMap::new();
        for m in deleted {
            let (list, unread_reactions) = incoming.entry(m.peer_user_id).or_default();
            if !m.out {
                list.push(m.box_id);
            }
            *unread_reactions += i32::from(m.reaction_unread);
        }
        let deletions = incoming
            .into_iter()
            .map(|(peer, (mut incoming_ids, unread_reactions))| {
                incoming_ids.sort_unstable();
                let (top_id, top_date) = tops.get(&(o, peer)).copied().unwrap_or((0, 0));
                DialogDeletion {
                    peer_user_id: peer,
                    incoming_ids,
                    top_id,
                    top_date,
                    boundary: boundaries.get(&o).copied().unwrap_or(0),
                    remove_empty,
                    unread_reactions,
                }
            })
            .collect();
        let event_id = delete_event_id(o, &ids);
        let event = UserEvent {
            event_id: event_id.to_string(),
            user_id: o,
            pts_count: ids.len() as i32,
            date,
            update: Some(Update {
                kind: Some(update::Kind::DeleteMessages(UpdateDeleteMessages { ids })),
            }),
            origin_auth_key_id: delete.auth_key_id,
            deletions,
            unread_reactions_delta: 0,
            ..Default::default()
        };
        rows.push(NewRow {
            destination: TO_UPDATES,
            event_id,
            payload: event.encode_to_vec(),
            traceparent: delete.traceparent.clone(),
        });
        events.push(event);
    }
    let updates_rows = outbox.enqueue(&mut tx, &rows).await?;
    tx.commit().await?;
    Ok(DeleteOutcome::Deleted(Deleted {
        updates_events: events,
        updates_rows,
        more,
    }))
}

/// Marks `owner`'s boxes `ids` deleted; returns those it marked (some may have gone already).
async fn mark(tx: &mut PgConnection, owner: i64, ids: &[i64]) -> Result<Vec<Marked>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/delete_mark.sql"))
        .bind(owner)
        .bind(ids)
        .fetch_all(tx)
        .await
}
