//! svc-dialogs' store against its own migrated schema: the projection of each user's log
//! (new messages, reads, receipts), pages of dialogs, a read's view, DELIVERED receipts and
//! outbox read dates.

use anyhow::Context;
use oxigram_outbox::{Outbox, RelayConfig};
use oxigram_proto::types::v1::{
    DialogDeletion, Message, Peer, Update, UpdateDeleteMessages, UpdateDeliveredOutbox,
    UpdateEditMessage, UpdateNewMessage, UpdateReadHistoryInbox, UpdateReadHistoryOutbox,
    UserEvent, update,
};
use oxigram_testkit::store::{self, Migrated};
use prost::Message as _;
use svc_dialogs::outbound::TO_UPDATES;
use svc_dialogs::{
    projection,
    store::{self as dialogs, ReadView},
};

/// The newest-first seek key before every dialog.
const FIRST_PAGE: dialogs::FolderKey = dialogs::FIRST_KEY;

struct Db {
    schema: Migrated,
    outbox: Outbox,
}

async fn schema() -> anyhow::Result<Db> {
    let schema = store::migrated(
        svc_dialogs::SCHEMA,
        &[&svc_dialogs::MIGRATOR, &oxigram_outbox::MIGRATOR],
    )
    .await?;
    let outbox = Outbox::new(
        schema.pool.clone(),
        svc_dialogs::SCHEMA,
        RelayConfig::default(),
    );
    Ok(Db { schema, outbox })
}

fn event(owner: i64, pts: i32, kind: update::Kind) -> UserEvent {
    UserEvent {
        event_id: uuid::Uuid::new_v4().to_string(),
        user_id: owner,
        pts,
        pts_count: 1,
        date: 1_000 + i64::from(pts),
        update: Some(Update { kind: Some(kind) }),
        ..Default::default()
    }
}

/// Message `id` of `owner`'s box in her dialog with `peer`, `peer_box_id` in the peer's.
fn message(
    owner: i64,
    pts: i32,
    peer: i64,
    id: i64,
    date: i64,
    out: bool,
    peer_box_id: i64,
) -> UserEvent {
    UserEvent {
        peer_box_id,
        ..event(
            owner,
            pts,
            update::Kind::NewMessage(UpdateNewMessage {
                message: Some(Message {
                    id,
                    peer_id: Some(Peer::user(peer)),
                    from_user_id: if out { owner } else { peer },
                    out,
                    date,
                    text: format!("m{id}"),
                    ..Default::default()
                }),
                random_id: 0,
            }),
        )
    }
}

fn read_inbox(owner: i64, pts: i32, peer: i64, max_id: i64, still_unread: i32) -> UserEvent {
    event(
        owner,
        pts,
        update::Kind::ReadHistoryInbox(UpdateReadHistoryInbox {
            peer: Some(Peer::user(peer)),
            max_id,
            still_unread_count: still_unread,
        }),
    )
}

fn read_outbox(owner: i64, pts: i32, peer: i64, max_id: i64) -> UserEvent {
    event(
        owner,
        pts,
        update::Kind::ReadHistoryOutbox(UpdateReadHistoryOutbox {
            peer: Some(Peer::user(peer)),
            max_id,
        }),
    )
}

fn delivered(owner: i64, pts: i32, peer: i64, max_id: i64) -> UserEvent {
    event(
        owner,
        pts,
        update::Kind::DeliveredOutbox(UpdateDeliveredOutbox {
            peer: Some(Peer::user(peer)),
            max_id,
        }),
    )
}

/// A delete in `owner`'s log at `pts` of her boxes `ids` of the dialog with `peer`: those of
/// them that were incoming, the newest box left (`top`, dated `top * 100`; 0: none) and the
/// boundary the delete saw.
#[allow(clippy::too_many_arguments)]
fn deleted(
    owner: i64,
    pts: i32,
    peer: i64,
    ids: &[i64],
    incoming: &[i64],
    top: i64,
    boundary: i64,
    remove_empty: bool,
) -> UserEvent {
    UserEvent {
        pts_count: ids.len() as i32,
        deletions: vec![DialogDeletion {
            peer_user_id: peer,
            incoming_ids: incoming.to_vec(),
            top_id: top,
            top_date: top * 100,
            boundary,
            remove_empty,
            unread_reactions: 0,
        }],
        ..event(
            owner,
            pts,
            update::Kind::DeleteMessages(UpdateDeleteMessages { ids: ids.to_vec() }),
        )
    }
}

/// (peer, top message id, top message date, unread count) of a dialog on a page.
type Top = (i64, i64, i64, i32);

/// (peer, top message id, top message date, unread count) of each dialog on a page.
async fn tops(db: &Db, owner: i64) -> anyhow::Result<Vec<(i64, i64, i64, i32)>> {
    Ok(
        dialogs::page(&db.schema.pool, owner, 0, FIRST_PAGE, 100, false)
            .await?
            .into_iter()
            .map(|d| {
                (
                    d.peer_user(),
                    d.top_message_id,
                    d.top_message_date,
                    d.unread_count,
                )
            })
            .collect(),
    )
}

/// (read inbox, read outbox, delivered outbox) watermarks of a dialog.
async fn watermarks(db: &Db, owner: i64, peer: i64) -> anyhow::Result<(i64, i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT read_inbox_max_id, read_outbox_max_id, delivered_outbox_max_id FROM dialogs
         WHERE owner_id = $1 AND peer_user_id = $2",
    )
    .bind(owner)
    .bind(peer)
    .fetch_one(&db.schema.pool)
    .await?)
}

#[tokio::test]
async fn new_messages_make_dialogs_with_their_top_and_unread_count() -> anyhow::Result<()> {
    let db = schema().await?;
    let applied = projection::apply(
        &db.schema.pool,
        &db.outbox,
        vec![
            message(1, 1, 2, 1, 100, false, 11),
            message(1, 2, 2, 2, 200, false, 12),
            message(1, 3, 3, 3, 300, true, 7),
        ],
    )
    .await?;
    assert_eq!((applied.applied, applied.held), (3, 0));
    assert!(applied.derived.0.is_empty());
    // Her own message to 3 is not unread.
    assert_eq!(tops(&db, 1).await?, vec![(3, 3, 300, 0), (2, 2, 200, 2)]);
    assert_eq!(dialogs::log_position(&db.schema.pool, 1).await?, 3);
    assert_eq!(dialogs::log_position(&db.schema.pool, 2).await?, 0);
    Ok(())
}

#[tokio::test]
async fn each_pts_applies_once_and_events_after_a_gap_are_held() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.schema.pool;
    let first = message(1, 1, 2, 1, 100, false, 11);
    let a = projection::apply(pool, &db.outbox, vec![first.clone(), first.clone()]).await?;
    assert_eq!((a.applied, a.held), (1, 0));
    // A replay of what was applied changes nothing.
    let a = projection::apply(pool, &db.outbox, vec![first]).await?;
    assert_eq!((a.applied, a.held), (0, 0));
    // pts 2 is missing: 3 and 4 wait.
    let third = message(1, 3, 2, 3, 300, false, 13);
    let fourth = message(1, 4, 2, 4, 400, false, 14);
    let a = projection::apply(pool, &db.outbox, vec![third.clone(), fourth.clone()]).await?;
    assert_eq!((a.applied, a.held), (0, 2));
    assert_eq!(dialogs::log_position(pool, 1).await?, 1);
    assert_eq!(tops(&db, 1).await?, vec![(2, 1, 100, 1)]);
    let a = projection::apply(
        pool,
        &db.outbox,
        vec![fourth, message(1, 2, 2, 2, 200, false, 12), third],
    )
    .await?;
    assert_eq!((a.applied, a.held), (3, 0));
    assert_eq!(dialogs::log_position(pool, 1).await?, 4);
    assert_eq!(tops(&db, 1).await?, vec![(2, 4, 400, 4)]);
    Ok(())
}

#[tokio::test]
async fn a_read_moves_the_watermark_and_tells_the_sender_in_her_ids() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.schema.pool;
    let read = read_inbox(1, 4, 2, 2, 1);
    let read_date = read.date;
    let applied = projection::apply(
        pool,
        &db.outbox,
        vec![
            message(1, 1, 2, 1, 100, false, 21),
            message(1, 2, 2, 2, 200, false, 22),
            message(1, 3, 2, 3, 300, false, 23),
            read,
            // Logged after the read: unread on top of what the read left.
            message(1, 5, 2, 4, 500, false, 24),
        ],
    )
    .await?;
    assert_eq!((applied.applied, applied.held), (5, 0));
    assert_eq!(tops(&db, 1).await?, vec![(2, 4, 500, 2)]);
    assert_eq!(watermarks(&db, 1, 2).await?.0, 2);

    // The sender's side: one event for her log, in her ids, and her dialog shows it at once.
    let (ids, rows) = &applied.derived;
    assert_eq!((ids.len(), rows.len()), (1, 1));
    assert_eq!(rows[0].destination, TO_UPDATES);
    let told = UserEvent::decode(rows[0].payload.as_slice())?;
    assert_eq!(told.user_id, 2);
    assert_eq!(
        told.update.and_then(|u| u.kind),
        Some(update::Kind::ReadHistoryOutbox(UpdateReadHistoryOutbox {
            peer: Some(Peer::user(1)),
            max_id: 22,
        }))
    );
    let outbox_rows: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(pool)
        .await?;
    assert_eq!(outbox_rows, 1);
    assert_eq!(watermarks(&db, 2, 1).await?.1, 22);

    // GetOutboxReadDate: (sender's message id) -> date of the read that covered it.
    for (msg_id, expected) in [(21, Some(read_date)), (22, Some(read_date)), (23, None)] {
        assert_eq!(
            dialogs::outbox_read_date(pool, 2, 1, msg_id).await?,
            expected,
            "message {msg_id}"
        );
    }
    // Applying the same read again (a replay) tells nobody twice.
    let again = projection::apply(pool, &db.outbox, vec![read_inbox(1, 4, 2, 2, 1)]).await?;
    assert_eq!((again.applied, again.derived.1.len()), (0, 0));
    Ok(())
}

#[tokio::test]
async fn receipts_from_the_log_only_move_watermarks_forward() -> anyhow::Result<()> {
    let db = schema().await?;
    let applied = projection::apply(
        &db.schema.pool,
        &db.outbox,
        vec![
            read_outbox(2, 1, 1, 5),
            delivered(2, 2, 1, 7),
            read_outbox(2, 3, 1, 3),
            delivered(2, 4, 1, 6),
        ],
    )
    .await?;
    assert_eq!(applied.applied, 4);
    assert_eq!(watermarks(&db, 2, 1).await?, (0, 5, 7));
    // A dialog with watermarks but no message yet is not on a page.
    assert!(tops(&db, 2).await?.is_empty());
    assert!(
        dialogs::outbox_read_date(&db.schema.pool, 2, 1, 5)
            .await?
            .is_some()
    );
    Ok(())
}

#[tokio::test]
async fn pages_seek_newest_first_by_date_id_and_peer() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.schema.pool;
    // Peers 10..=14; 11 and 12 share a date, 13 and 14 share date and id.
    let events = vec![
        message(1, 1, 10, 1, 100, false, 1),
        message(1, 2, 11, 2, 200, false, 1),
        message(1, 3, 12, 3, 200, false, 1),
        message(1, 4, 13, 4, 300, false, 1),
        message(1, 5, 14, 4, 300, true, 1),
    ];
    projection::apply(pool, &db.outbox, events).await?;
    let mut seen = Vec::new();
    let mut after = FIRST_PAGE;
    loop {
        let page = dialogs::page(pool, 1, 0, after, 2, false).await?;
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = (
            0,
            last.top_message_date,
            last.top_message_id,
            last.peer_user(),
        );
        seen.extend(page.iter().map(|d| d.peer_user()));
    }
    assert_eq!(seen, vec![14, 13, 12, 11, 10]);
    // Another owner sees none of them.
    assert!(
        dialogs::page(pool, 2, 0, FIRST_PAGE, 10, false)
            .await?
            .is_empty()
    );
    Ok(())
}

#[tokio::test]
async fn a_read_view_counts_against_the_applied_log() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.schema.pool;
    projection::apply(
        pool,
        &db.outbox,
        vec![
            message(1, 1, 2, 1, 100, false, 11),
            message(1, 2, 2, 2, 200, false, 12),
            message(1, 3, 2, 3, 300, false, 13),
            read_inbox(1, 4, 2, 1, 2),
        ],
    )
    .await?;
    let view = |position, read_inbox_max_id, target, still_unread| ReadView {
        position,
        read_inbox_max_id,
        target,
        still_unread,
    };
    // (peer, max_id) -> view
    let cases = [
        ((2, 0), view(4, 1, 3, 0)),
        ((2, 2), view(4, 1, 2, 1)),
        ((2, 10), view(4, 1, 3, 0)),
        // A dialog not applied yet reads as empty.
        ((9, 0), view(4, 0, 0, 0)),
    ];
    for ((peer, max_id), expected) in cases {
        assert_eq!(
            dialogs::read_view(pool, 1, peer, max_id).await?,
            expected,
            "peer {peer}, max_id {max_id}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn delivered_receipts_are_kept_per_device_and_told_to_senders_once() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.schema.pool;
    projection::apply(
        pool,
        &db.outbox,
        vec![
            message(1, 1, 2, 1, 100, false, 11),
            message(1, 2, 2, 2, 200, false, 12),
            message(1, 3, 3, 3, 300, false, 31),
        ],
    )
    .await?;
    // (device, max_id) -> (the device's watermark, the senders told and up to which of their ids)
    let receipts = [
        // Capped at the newest message received.
        ((100, 10), (3, vec![(2, 12), (3, 31)])),
        ((100, 3), (3, vec![])),
        ((100, 1), (3, vec![])),
        // Another device: its own watermark, but the senders know already.
        ((200, 2), (2, vec![])),
        ((200, 0), (2, vec![])),
    ];
    for ((device, max_id), (watermark, told)) in receipts {
        let (at, moved) = dialogs::received(pool, &db.outbox, 1, device, max_id).await?;
        let got: Vec<(i64, i64)> = moved
            .map(|m| {
                assert_eq!(m.rows.len(), m.events.len());
                m.events
            })
            .unwrap_or_default()
            .into_iter()
            .map(|e| match e.update.and_then(|u| u.kind) {
                Some(update::Kind::DeliveredOutbox(d)) if d.peer_user() == 1 => {
                    Ok((e.user_id, d.max_id))
                }
                other => anyhow::bail!("not a receipt from 1: {other:?}"),
            })
            .collect::<anyhow::Result<_>>()?;
        assert_eq!(
            (at, got),
            (watermark, told),
            "device {device}, max_id {max_id}"
        );
    }
    assert_eq!(watermarks(&db, 2, 1).await?.2, 12);
    assert_eq!(watermarks(&db, 3, 1).await?.2, 31);
    let stored: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT auth_key_id, max_id FROM device_receipts WHERE owner_id = 1 ORDER BY 1",
    )
    .fetch_all(pool)
    .await?;
    assert_eq!(stored, vec![(100, 3), (200, 2)]);
    Ok(())
}

#[tokio::test]
async fn a_receipt_before_any_message_reports_nothing() -> anyhow::Result<()> {
    let db = schema().await?;
    let (at, moved) = dialogs::received(&db.schema.pool, &db.outbox, 1, 100, 5).await?;
    assert_eq!(at, 0);
    assert!(moved.is_none());
    let rows: Option<i64> = sqlx::query_scalar("SELECT max(id) FROM outbox")
        .fetch_one(&db.schema.pool)
        .await
        .context("outbox")?;
    assert_eq!(rows, None);
    Ok(())
}

#[tokio::test]
async fn a_log_that_began_before_the_projection_is_taken_up_from_its_first_event()
-> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.schema.pool;
    // Owner 2 has a dialog already (her outbox watermark), but no position: her log began
    // before this projection did.
    let mut conn = pool.acquire().await?;
    assert!(dialogs::advance(&mut conn, dialogs::Watermark::ReadOutbox, 2, 1, 5).await?);
    assert!(!dialogs::advance(&mut conn, dialogs::Watermark::ReadOutbox, 2, 1, 4).await?);
    drop(conn);
    // (owner, first pts handed on) -> (applied, held, position after)
    let cases = [
        ((2, 7), (1, 0, 7)),
        // A new owner's log starts at pts 1: anything later waits for the missing events.
        ((3, 7), (0, 1, 0)),
    ];
    for ((owner, pts), (applied, held, position)) in cases {
        let a = projection::apply(
            pool,
            &db.outbox,
            vec![message(owner, pts, 1, 1, 100, false, 1)],
        )
        .await?;
        assert_eq!(
            (a.applied, a.held, dialogs::log_position(pool, owner).await?),
            (applied, held, position),
            "owner {owner}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_delete_recomputes_top_and_unread_and_an_emptied_dialog_leaves_until_a_new_message()
-> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.schema.pool;
    // Ann (1) and Bob (2): 1, 2 and 4 from Bob, 3 from Ann. Ann and Cat (3): 5 from Cat.
    let apply = |events: Vec<UserEvent>| projection::apply(pool, &db.outbox, events);
    apply(vec![
        message(1, 1, 2, 1, 100, false, 11),
        message(1, 2, 2, 2, 200, false, 12),
        message(1, 3, 2, 3, 300, true, 13),
        message(1, 4, 2, 4, 400, false, 14),
        message(1, 5, 3, 5, 500, false, 15),
    ])
    .await?;
    assert_eq!(tops(&db, 1).await?, [(3, 5, 500, 1), (2, 4, 400, 3)]);
    // (events, dialogs after them)
    let steps: Vec<(Vec<UserEvent>, Vec<Top>)> = vec![
        // The top, an unread incoming message: the one before it is the top, 2 unread.
        (
            vec![deleted(1, 6, 2, &[4], &[4], 3, 5, true)],
            vec![(3, 5, 500, 1), (2, 3, 300, 2)],
        ),
        // An edit changes no dialog.
        (
            vec![event(
                1,
                7,
                update::Kind::EditMessage(UpdateEditMessage {
                    message: Some(Message {
                        id: 3,
                        peer_id: Some(Peer::user(2)),
                        ..Default::default()
                    }),
                }),
            )],
            vec![(3, 5, 500, 1), (2, 3, 300, 2)],
        ),
        // Everything left (history cleared): the dialog leaves the list.
        (
            vec![deleted(1, 10, 2, &[1, 2, 3], &[1, 2], 0, 5, true)],
            vec![(3, 5, 500, 1)],
        ),
        // Cat's dialog cleared with just_clear: it stays where it was, empty.
        (
            vec![deleted(1, 11, 3, &[5], &[5], 0, 5, false)],
            vec![(3, 0, 500, 0)],
        ),
        // A new message brings Bob's dialog back, the only unread one.
        (
            vec![message(1, 12, 2, 6, 600, false, 16)],
            vec![(2, 6, 600, 1), (3, 0, 500, 0)],
        ),
    ];
    for (i, (events, expected)) in steps.into_iter().enumerate() {
        apply(events).await?;
        assert_eq!(tops(&db, 1).await?, expected, "step {i}");
    }
    assert_eq!(dialogs::log_position(pool, 1).await?, 12);
    // A read counts what is left: nothing of the deleted messages.
    assert_eq!(
        dialogs::read_view(pool, 1, 2, 0).await?,
        ReadView {
            position: 12,
            read_inbox_max_id: 0,
            target: 6,
            still_unread: 0,
        }
    );
    Ok(())
}

/// A delete and the new messages around it reach the log in either order: a message committed
/// after the delete (an id above its boundary) may be logged before it, and one committed
/// before it (at or below the boundary) after it; two deletes may be logged in either order.
/// Each pair of orders ends in the same dialog.
#[tokio::test]
async fn deletes_and_messages_give_the_same_dialog_in_either_log_order() -> anyhow::Result<()> {
    // Ann's (1) log with Bob (2) before the race: Bob's messages 1 and 2.
    let before = || {
        vec![
            message(1, 1, 2, 1, 100, false, 11),
            message(1, 2, 2, 2, 200, false, 12),
        ]
    };
    // (what races, at pts 3 and 4 in one order and the other; the dialog after both)
    type Race = (
        fn(i32) -> UserEvent,
        fn(i32) -> UserEvent,
        (i64, i64, i64, i32),
    );
    let races: [Race; 5] = [
        // Message 2 deleted (boundary 2, top 1); message 3 sent after the delete.
        (
            |pts| deleted(1, pts, 2, &[2], &[2], 1, 2, true),
            |pts| message(1, pts, 2, 3, 300, false, 13),
            (2, 3, 300, 2),
        ),
        // Message 3 sent before the delete and deleted by it (boundary 3, top 2): logged
        // after the delete, it neither comes back as top nor counts as unread.
        (
            |pts| deleted(1, pts, 2, &[3], &[3], 2, 3, true),
            |pts| message(1, pts, 2, 3, 300, false, 13),
            (2, 2, 200, 2),
        ),
        // Messages 1 and 2 deleted, message 3 sent before the delete and kept: the delete saw
        // it as the top.
        (
            |pts| deleted(1, pts, 2, &[1, 2], &[1, 2], 3, 3, true),
            |pts| message(1, pts, 2, 3, 300, false, 13),
            (2, 3, 300, 1),
        ),
        // Two deletes with no box between them: 2 first (top 1), then 1 (nothing left).
        (
            |pts| deleted(1, pts, 2, &[2], &[2], 1, 2, true),
            |pts| deleted(1, pts, 2, &[1], &[1], 0, 2, true),
            (0, 0, 0, 0),
        ),
        // A delete of 2 (top 1), message 3 sent, then a delete of 1 (top 3).
        (
            |pts| deleted(1, pts, 2, &[2], &[2], 1, 2, true),
            |pts| deleted(1, pts, 2, &[1], &[1], 3, 3, true),
            (2, 3, 300, 0),
        ),
    ];
    for (n, (first, second, expected)) in races.into_iter().enumerate() {
        for swapped in [false, true] {
            let db = schema().await?;
            let pool = &db.schema.pool;
            projection::apply(pool, &db.outbox, before()).await?;
            // Each event's pts_count decides where it starts; place them one after the other.
            let (a, b) = if swapped {
                (second, first)
            } else {
                (first, second)
            };
            let a1 = a(3);
            let a_end = 2 + a1.pts_count;
            let a1 = UserEvent { pts: a_end, ..a1 };
            let b1 = b(0);
            let b1 = UserEvent {
                pts: a_end + b1.pts_count,
                ..b1
            };
            let applied = projection::apply(pool, &db.outbox, vec![a1]).await?;
            assert_eq!(applied.held, 0, "race {n}, swapped {swapped}");
            projection::apply(pool, &db.outbox, vec![b1]).await?;
            let got = tops(&db, 1).await?;
            let want: Vec<Top> = if expected.0 == 0 {
                vec![]
            } else {
                vec![expected]
            };
            assert_eq!(got, want, "race {n}, swapped {swapped}");
        }
    }
    Ok(())
}
