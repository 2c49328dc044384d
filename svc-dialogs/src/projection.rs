//! Dialogs as a projection of each user's update log. svc-updates hands on every logged event
//! with its pts; each owner's events are applied here in pts order, each once, and
//! `log_positions` records how far. So a dialog's top message, watermarks and unread count are
//! always those of a prefix of its owner's log, which is what a read counts against
//! (`crate::read`).
//!
//! Events that arrive ahead of a gap (an earlier hand-off still on its way) are held back: the
//! call reports it, and the outbox delivers them again, after the missing ones.

use std::collections::{BTreeMap, HashMap, HashSet};

use oxigram_outbox::{NewRow, Outbox};
use oxigram_proto::types::v1::{
    DialogDeletion, Peer, Update, UpdateDraftMessage, UpdateReadHistoryInbox,
    UpdateReadHistoryOutbox, UserEvent, update,
};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::{
    apply_settings::{self, SettingChange},
    outbound,
    store::{Watermark, advance},
};

/// What one application did.
#[derive(Default)]
pub struct Applied {
    pub applied: i32,
    /// Events held back behind a gap in their owner's pts.
    pub held: usize,
    /// Events made for other users' logs (the sender's side of a read), written to the outbox:
    /// their outbox ids and rows, for the fast path.
    pub derived: (Vec<i64>, Vec<NewRow>),
}

/// A new message of a dialog, as `apply_messages` takes it.
struct Arrived {
    owner: i64,
    peer: i64,
    id: i64,
    date: i64,
    out: bool,
    peer_box_id: i64,
    event_id: Uuid,
}

/// A read of a dialog from its owner's log.
struct ReadInbox {
    event_id: Uuid,
    date: i64,
    owner: i64,
    read: UpdateReadHistoryInbox,
}

/// A delete in one dialog from its owner's log.
struct Deletion {
    owner: i64,
    date: i64,
    dialog: DialogDeletion,
}

/// One step of a batch: the messages and deletes logged before a read or a setting of each
/// owner, then those reads and settings. Within a step, messages and deletes give the same
/// dialogs in either order (a delete applied first records its incoming ids deleted, and its
/// boundary keeps a message it saw from moving the top), so each kind is applied together; a
/// read sets the unread count its place in the log gave it, and a setting may depend on what
/// came before it (a draft a message sent after it clears), so they come after them.
#[derive(Default)]
struct Phase {
    messages: Vec<Arrived>,
    deletions: Vec<Deletion>,
    reads: Vec<ReadInbox>,
    settings: Vec<SettingChange>,
}

/// Applies logged events (each carrying its pts) in each owner's pts order, once each.
pub async fn apply(
    pool: &PgPool,
    outbox: &Outbox,
    events: Vec<UserEvent>,
) -> Result<Applied, sqlx::Error> {
    let mut by_owner: BTreeMap<i64, Vec<UserEvent>> = BTreeMap::new();
    for e in events {
        by_owner.entry(e.user_id).or_default().push(e);
    }
    for events in by_owner.values_mut() {
        events.sort_by_key(|e| e.pts);
        events.dedup_by_key(|e| e.pts);
    }
    let mut tx = pool.begin().await?;
    let positions = lock_positions(&mut tx, &by_owner).await?;

    let mut applied = Applied::default();
    let mut phases: Vec<Phase> = Vec::new();
    let mut other: Vec<UserEvent> = Vec::new();
    let (mut moved_owners, mut moved_to) = (Vec::new(), Vec::new());
    for (owner, events) in by_owner {
        let from = positions.get(&owner).copied().unwrap_or(0);
        let mut at = from;
        let mut phase = 0;
        let total = events.len();
        for (i, e) in events.into_iter().enumerate() {
            if e.pts <= at {
                continue;
            }
            if e.pts - e.pts_count != at {
                applied.held += total - i;
                break;
            }
            at = e.pts;
            applied.applied += 1;
            if phases.len() <= phase {
                phases.resize_with(phase + 1, Phase::default);
            }
            match e.update.as_ref().and_then(|u| u.kind.as_ref()) {
                Some(update::Kind::NewMessage(new)) => {
                    if let Some(m) = &new.message {
                        phases[phase].messages.push(Arrived {
                            owner,
                            peer: m.peer_user(),
                            id: m.id,
                            date: m.date,
                            out: m.out,
                            peer_box_id: e.peer_box_id,
                            event_id: Uuid::parse_str(&e.event_id)
                                .map_err(|err| sqlx::Error::Decode(Box::new(err)))?,
                        });
                    }
                }
                Some(update::Kind::DeleteMessages(_)) => {
                    phases[phase]
                        .deletions
                        .extend(e.deletions.into_iter().map(|dialog| Deletion {
                            owner,
                            date: e.date,
                            dialog,
                        }));
                }
                // An edit changes no dialog: the top message is shown in its current state.
                Some(update::Kind::EditMessage(_)) => {}
                Some(update::Kind::ReadHistoryInbox(read)) => {
                    phases[phase].reads.push(ReadInbox {
                        event_id: Uuid::parse_str(&e.event_id)
                            .map_err(|err| sqlx::Error::Decode(Box::new(err)))?,
                        date: e.date,
                        owner,
                        read: *read,
                    });
                    // Messages after this read come after it.
                    phase += 1;
                }
                Some(kind) if apply_settings::is_setting(kind) => {
                    if let Some(kind) = e.update.and_then(|u| u.kind) {
                        phases[phase].settings.push(SettingChange {
                            owner,
                            pts: e.pts,
                            kind,
                        });
                    }
                    phase += 1;
                }
                _ => other.push(e),
            }
        }
        if at > from {
            moved_owners.push(owner);
            moved_to.push(at);
        }
    }
    let mut derived = Vec::new();
    for phase in phases {
        derived.extend(apply_messages(&mut tx, &phase.messages).await?);
        for deletion in phase.deletions {
            apply_deletion(&mut tx, deletion).await?;
        }
        for read in phase.reads {
            derived.extend(apply_read(&mut tx, read).await?);
        }
        for change in phase.settings {
            apply_settings::apply(&mut tx, change).await?;
        }
    }
    for e in other {
        apply_receipt(&mut tx, e).await?;
    }
    if !moved_owners.is_empty() {
        // Primary key of log_positions.
        sqlx::query(include_str!("../sql/record_positions.sql"))
            .bind(&moved_owners)
            .bind(&moved_to)
            .execute(&mut *tx)
            .await?;
    }
    if !derived.is_empty() {
        let ids = outbox.enqueue(&mut tx, &derived).await?;
        applied.derived = (ids, derived);
    }
    tx.commit().await?;
    Ok(applied)
}

/// Each owner's position, locked until commit (primary key of log_positions, in key order, so
/// concurrent applications never deadlock). An owner seen for the first time starts at pts 0,
/// unless her log began before this projection did (she has dialogs already): then from the
/// first event that reaches it.
async fn lock_positions(
    tx: &mut PgConnection,
    by_owner: &BTreeMap<i64, Vec<UserEvent>>,
) -> Result<HashMap<i64, i32>, sqlx::Error> {
    let owners: Vec<i64> = by_owner.keys().copied().collect();
    let created: Vec<i64> = sqlx::query_scalar(include_str!("../sql/create_positions.sql"))
        .bind(&owners)
        .fetch_all(&mut *tx)
        .await?;
    let locked: Vec<(i64, i32)> = sqlx::query_as(include_str!("../sql/lock_positions.sql"))
        .bind(&owners)
        .fetch_all(&mut *tx)
        .await?;
    let first_start = |owner: &i64| {
        by_owner
            .get(owner)
            .and_then(|events| events.first())
            .map_or(0, |e| e.pts - e.pts_count)
    };
    let late: Vec<i64> = created
        .into_iter()
        .filter(|owner| first_start(owner) > 0)
        .collect();
    let adopted: HashSet<i64> = if late.is_empty() {
        HashSet::new()
    } else {
        // Primary key of dialogs (its owner prefix).
        sqlx::query_scalar::<_, i64>(
            "SELECT DISTINCT owner_id FROM dialogs WHERE owner_id = ANY($1)",
        )
        .bind(&late)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect()
    };
    Ok(locked
        .into_iter()
        .map(|(owner, pts)| {
            let from = if adopted.contains(&owner) {
                first_start(&owner)
            } else {
                pts
            };
            (owner, from)
        })
        .collect())
}

/// A dialog as new messages left it: its draft, if it has one.
#[derive(sqlx::FromRow)]
struct Drafted {
    owner_id: i64,
    peer_user_id: i64,
    draft_pts: i32,
}

/// New messages: recorded as incoming where they are, and each dialog's top message and unread
/// count moved once, in one statement (creating the dialogs that are missing); a message
/// counts as unread only above the dialog's read watermark, which the reads logged before it
/// have set. A message the owner sent clears her draft of the dialog: the draft-cleared update
/// for her log is returned (an outbox row), its id derived from the message's event, and it
/// names the draft it clears, so a draft saved after the message stays.
async fn apply_messages(
    tx: &mut PgConnection,
    arrived: &[Arrived],
) -> Result<Vec<NewRow>, sqlx::Error> {
    if arrived.is_empty() {
        return Ok(Vec::new());
    }
    let mut tops: BTreeMap<(i64, i64), (i64, i64)> = BTreeMap::new();
    // The first message each owner sent in a dialog: its event names the draft-cleared one.
    let mut sent: BTreeMap<(i64, i64), (Uuid, i64)> = BTreeMap::new();
    for m in arrived {
        let top = tops.entry((m.owner, m.peer)).or_insert((0, 0));
        if m.id > top.0 {
            *top = (m.id, m.date);
        }
        if m.out {
            sent.entry((m.owner, m.peer))
                .or_insert((m.event_id, m.date));
        }
    }
    let incoming: Vec<&Arrived> = arrived.iter().filter(|m| !m.out).collect();
    sqlx::query(include_str!("../sql/apply_messages.sql"))
        .bind(tops.keys().map(|k| k.0).collect::<Vec<_>>())
        .bind(tops.keys().map(|k| k.1).collect::<Vec<_>>())
        .bind(tops.values().map(|v| v.0).collect::<Vec<_>>())
        .bind(tops.values().map(|v| v.1).collect::<Vec<_>>())
        .bind(incoming.iter().map(|m| m.owner).collect::<Vec<_>>())
        .bind(incoming.iter().map(|m| m.peer).collect::<Vec<_>>())
        .bind(incoming.iter().map(|m| m.id).collect::<Vec<_>>())
        .bind(incoming.iter().map(|m| m.peer_box_id).collect::<Vec<_>>())
        .bind(
            tops.keys()
                .map(|k| sent.contains_key(k))
                .collect::<Vec<_>>(),
        )
        .execute(&mut *tx)
        .await?;
    if sent.is_empty() {
        return Ok(Vec::new());
    }
    // Primary key of dialogs.
    let drafted: Vec<Drafted> = sqlx::query_as(include_str!("../sql/drafted.sql"))
        .bind(sent.keys().map(|k| k.0).collect::<Vec<_>>())
        .bind(sent.keys().map(|k| k.1).collect::<Vec<_>>())
        .fetch_all(&mut *tx)
        .await?;
    Ok(drafted
        .into_iter()
        .filter_map(|d| {
            let (message_event, date) = *sent.get(&(d.owner_id, d.peer_user_id))?;
            let event_id = outbound::draft_cleared_event_id(message_event);
            let event = UserEvent {
                event_id: event_id.to_string(),
                user_id: d.owner_id,
                pts_count: 1,
                date,
                update: Some(Update {
                    kind: Some(update::Kind::DraftMessage(UpdateDraftMessage {
                        peer: Some(Peer::user(d.peer_user_id)),
                        draft: None,
                        clears_pts: d.draft_pts,
                    })),
                }),
                ..Default::default()
            };
            Some(outbound::row(event_id, &event))
        })
        .collect())
}

/// A delete from the owner's log, in one dialog: its deleted incoming messages stop counting
/// as unread, and so do the unread reactions of its deleted boxes; the top becomes the newest message left, as the delete saw it, unless the
/// dialog knows a newer one (sql/apply_deletion.sql).
async fn apply_deletion(tx: &mut PgConnection, d: Deletion) -> Result<(), sqlx::Error> {
    // Primary keys of dialog_incoming and dialogs.
    sqlx::query(include_str!("../sql/apply_deletion.sql"))
        .bind(d.owner)
        .bind(d.dialog.peer_user_id)
        .bind(&d.dialog.incoming_ids)
        .bind(d.dialog.top_id)
        .bind(d.dialog.top_date)
        .bind(d.dialog.boundary)
        .bind(d.dialog.remove_empty)
        .bind(d.date)
        .bind(d.dialog.unread_reactions)
        .execute(tx)
        .await?;
    Ok(())
}

/// A read from the reader's log: her watermark and unread count become what the read says
/// (its count was taken against her log just before it). When it covers messages of the peer,
/// the peer's log gets the read of her own messages, in her ids: that event's id derives from
/// the read's, so applying the read again writes it again harmlessly (svc-updates logs an
/// event id once).
async fn apply_read(tx: &mut PgConnection, r: ReadInbox) -> Result<Option<NewRow>, sqlx::Error> {
    let (owner, peer) = (r.owner, r.read.peer_user());
    // Primary key of dialogs; dialog_incoming's for the peer's ids of the messages read.
    let peer_max: Option<Option<i64>> = sqlx::query_scalar(include_str!("../sql/apply_read.sql"))
        .bind(owner)
        .bind(peer)
        .bind(r.read.max_id)
        .bind(r.read.still_unread_count)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(peer_max) = peer_max.flatten().filter(|id| *id > 0 && peer != owner) else {
        return Ok(None);
    };
    // The peer's dialog shows it at once; her log's copy finds it done.
    read_outbox(tx, peer, owner, peer_max, r.date).await?;
    let event_id = outbound::read_outbox_event_id(r.event_id);
    let event = UserEvent {
        event_id: event_id.to_string(),
        user_id: peer,
        pts_count: 1,
        date: r.date,
        update: Some(Update {
            kind: Some(update::Kind::ReadHistoryOutbox(UpdateReadHistoryOutbox {
                peer: Some(Peer::user(owner)),
                max_id: peer_max,
            })),
        }),
        ..Default::default()
    };
    Ok(Some(outbound::row(event_id, &event)))
}

/// `reader` read `owner`'s messages up to `max_id` (in `owner`'s ids) at `date`: the owner's
/// outbox watermark moves forward, and the date is kept for GetOutboxReadDate.
async fn read_outbox(
    tx: &mut PgConnection,
    owner: i64,
    reader: i64,
    max_id: i64,
    date: i64,
) -> Result<(), sqlx::Error> {
    if advance(tx, Watermark::ReadOutbox, owner, reader, max_id).await? {
        sqlx::query(include_str!("../sql/record_outbox_read.sql"))
            .bind(owner)
            .bind(reader)
            .bind(max_id)
            .bind(date)
            .execute(tx)
            .await?;
    }
    Ok(())
}

/// A receipt from the owner's log: her side's outbox watermarks only move forward. A reaction
/// or a read of reactions moves her dialog's unread reactions by what the event says.
async fn apply_receipt(tx: &mut PgConnection, e: UserEvent) -> Result<(), sqlx::Error> {
    let delta = e.unread_reactions_delta;
    match e.update.and_then(|u| u.kind) {
        Some(update::Kind::MessageReactions(u)) if delta != 0 => {
            unread_reactions(tx, e.user_id, u.peer_user(), delta).await?;
        }
        Some(update::Kind::ReadReactions(u)) if delta != 0 => {
            unread_reactions(tx, e.user_id, u.peer_user(), delta).await?;
        }
        Some(update::Kind::ReadHistoryOutbox(read)) => {
            read_outbox(tx, e.user_id, read.peer_user(), read.max_id, e.date).await?;
        }
        Some(update::Kind::DeliveredOutbox(delivered)) => {
            advance(
                tx,
                Watermark::DeliveredOutbox,
                e.user_id,
                delivered.peer_user(),
                delivered.max_id,
            )
            .await?;
        }
        _ => {}
    }
    Ok(())
}

/// The owner's unread reactions in the dialog with `peer` move by `delta`.
async fn unread_reactions(
    tx: &mut PgConnection,
    owner: i64,
    peer: i64,
    delta: i32,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/apply_unread_reactions.sql"))
        .bind(owner)
        .bind(peer)
        .bind(delta)
        .execute(tx)
        .await?;
    Ok(())
}
