//! svc-updates' store against its own migrated schema: the one append path (gap-free pts per
//! user, idempotency by event id, the remembered-pts guard, trimming, the rows handed on),
//! logging reads, the state and getDifference's slices.

use anyhow::Context;
use oxigram_outbox::{Outbox, RelayConfig};
use oxigram_proto::types::v1::{
    Message, Peer, Update, UpdateDeleteMessages, UpdateNewMessage, UpdateReadHistoryInbox,
    UserEvent, update,
};
use oxigram_testkit::store::{Migrated, migrated};
use svc_updates::log::{self, LastPts, ReadOutcome, ReadRequest, ValidEvent, Written};
use uuid::Uuid;

const ANN: i64 = 1;
const BOB: i64 = 2;

async fn schema() -> anyhow::Result<(Migrated, Outbox)> {
    let db = migrated(
        svc_updates::SCHEMA,
        &[&svc_updates::MIGRATOR, &oxigram_outbox::MIGRATOR],
    )
    .await?;
    let outbox = Outbox::new(db.pool.clone(), svc_updates::SCHEMA, RelayConfig::default());
    Ok((db, outbox))
}

/// `user`'s new message `box_id` from `peer` (incoming), or to her (`out`).
fn message_event(event_id: Uuid, user: i64, peer: i64, box_id: i64, out: bool) -> ValidEvent {
    event(
        event_id,
        user,
        1,
        update::Kind::NewMessage(UpdateNewMessage {
            message: Some(Message {
                id: box_id,
                peer_id: Some(Peer::user(peer)),
                from_user_id: if out { user } else { peer },
                out,
                text: format!("message {box_id}"),
                ..Default::default()
            }),
            random_id: 0,
        }),
    )
}

fn event(event_id: Uuid, user_id: i64, pts_count: i32, kind: update::Kind) -> ValidEvent {
    ValidEvent {
        event_id,
        event: UserEvent {
            event_id: event_id.to_string(),
            user_id,
            pts_count,
            date: 1_700_000_000,
            update: Some(Update { kind: Some(kind) }),
            origin_auth_key_id: 7,
            ..Default::default()
        },
        traceparent: None,
    }
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn pts_of(written: &Written) -> Vec<(i64, i32, i32)> {
    written
        .appended
        .iter()
        .map(|a| (a.user_id, a.pts, a.pts_count))
        .collect()
}

/// The pts of a user's logged updates, ascending.
async fn logged(db: &Migrated, user: i64) -> anyhow::Result<Vec<i32>> {
    Ok(
        sqlx::query_scalar("SELECT pts FROM update_log WHERE user_id = $1 ORDER BY pts")
            .bind(user)
            .fetch_all(&db.pool)
            .await?,
    )
}

#[tokio::test]
async fn appends_give_each_user_gap_free_pts_once_per_event() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let mut last = LastPts::default();
    let written = log::append(
        &db.pool,
        &outbox,
        vec![
            message_event(id(1), ANN, BOB, 1, false),
            message_event(id(2), BOB, ANN, 1, true),
            event(
                id(3),
                ANN,
                2,
                update::Kind::ReadHistoryInbox(UpdateReadHistoryInbox {
                    peer: Some(Peer::user(BOB)),
                    max_id: 1,
                    still_unread_count: 0,
                }),
            ),
            // A repeat within the batch keeps the first one's pts.
            message_event(id(1), ANN, BOB, 1, false),
        ],
        100,
        &mut last,
    )
    .await?;
    assert_eq!(
        pts_of(&written),
        [(ANN, 1, 1), (BOB, 1, 1), (ANN, 3, 2), (ANN, 1, 1)]
    );
    // Each new event is handed on twice (a push job, the logged event for dialogs), and its
    // rows are in the outbox.
    let destinations: Vec<&str> = written.jobs.iter().map(|r| r.destination).collect();
    assert_eq!(
        destinations,
        [
            svc_updates::TO_DISPATCH,
            svc_updates::TO_DIALOGS,
            svc_updates::TO_DISPATCH,
            svc_updates::TO_DIALOGS,
            svc_updates::TO_DISPATCH,
            svc_updates::TO_DIALOGS,
        ]
    );
    assert_eq!(written.job_ids.len(), written.jobs.len());
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE id = ANY($1)")
        .bind(&written.job_ids)
        .fetch_one(&db.pool)
        .await?;
    let distinct: std::collections::HashSet<_> = written.job_ids.iter().collect();
    assert_eq!(stored, distinct.len() as i64);

    // The worker remembers both users now; an event logged before keeps its pts, and the
    // batch still logs the new one right after.
    let again = log::append(
        &db.pool,
        &outbox,
        vec![
            message_event(id(4), ANN, BOB, 2, false),
            message_event(id(3), ANN, BOB, 9, false),
        ],
        100,
        &mut last,
    )
    .await?;
    assert_eq!(pts_of(&again), [(ANN, 4, 1), (ANN, 3, 2)]);
    assert_eq!(again.jobs.len(), 2);
    assert_eq!(logged(&db, ANN).await?, [1, 3, 4]);

    // Only repeats: nothing new is logged or handed on.
    let repeats = log::append(
        &db.pool,
        &outbox,
        vec![message_event(id(2), BOB, ANN, 1, true)],
        100,
        &mut last,
    )
    .await?;
    assert_eq!(pts_of(&repeats), [(BOB, 1, 1)]);
    assert!(repeats.jobs.is_empty() && repeats.job_ids.is_empty());
    Ok(())
}

#[tokio::test]
async fn an_append_continues_from_pts_another_writer_moved() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    // Two workers' memories: each learns the pts only from its own appends.
    let (mut mine, mut other) = (LastPts::default(), LastPts::default());
    for (n, by_me) in [(1, true), (2, true), (3, false), (4, true), (5, false)] {
        let last = if by_me { &mut mine } else { &mut other };
        let events = vec![message_event(id(n), ANN, BOB, 1, false)];
        let written = log::append(&db.pool, &outbox, events, 100, last).await?;
        assert_eq!(pts_of(&written), [(ANN, n as i32, 1)], "event {n}");
    }
    assert_eq!(logged(&db, ANN).await?, [1, 2, 3, 4, 5]);
    Ok(())
}

#[tokio::test]
async fn a_users_log_is_trimmed_past_its_retention_in_steps() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let mut last = LastPts::default();
    let retain = 10;
    let mut floors = vec![];
    for n in 1..=25 {
        log::append(
            &db.pool,
            &outbox,
            vec![message_event(id(n), ANN, BOB, n as i64, false)],
            retain,
            &mut last,
        )
        .await?;
        floors.push(log::state(&db.pool, ANN).await?.1);
    }
    // A trim keeps `retain` updates, once the floor is more than a tenth of it behind.
    let first_trim = floors.iter().position(|&f| f > 0).context("no trim")? + 1;
    assert_eq!((first_trim, floors[first_trim - 1]), (12, 2));
    assert_eq!(floors[24], 14);
    assert_eq!(logged(&db, ANN).await?, (15..=25).collect::<Vec<_>>());

    // (after pts, limit, the pts served, the floor reported)
    let cases: [(i32, i32, &[i32]); 3] = [
        (14, 3, &[15, 16, 17]),
        (23, 100, &[24, 25]),
        // Trimmed: nothing is served, and the floor tells the caller.
        (13, 100, &[]),
    ];
    for (after, limit, served) in cases {
        let difference = log::difference(&db.pool, ANN, after, limit).await?;
        let pts: Vec<i32> = difference.updates.iter().map(|u| u.pts).collect();
        assert_eq!(pts, served, "after {after}");
        assert_eq!((difference.state.pts, difference.trimmed_pts), (25, 14));
    }
    Ok(())
}

#[tokio::test]
async fn the_state_and_difference_of_a_user_come_from_her_log() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    // No log yet.
    let (state, trimmed) = log::state(&db.pool, ANN).await?;
    assert_eq!((state.pts, trimmed), (0, 0));
    let empty = log::difference(&db.pool, ANN, 0, 10).await?;
    assert_eq!((empty.state.pts, empty.updates.len()), (0, 0));

    let events = (1..=3)
        .map(|n| message_event(id(n), ANN, BOB, n as i64, false))
        .collect();
    log::append(&db.pool, &outbox, events, 100, &mut LastPts::default()).await?;
    assert_eq!(log::state(&db.pool, ANN).await?.0.pts, 3);
    let slice = log::difference(&db.pool, ANN, 0, 2).await?;
    let served: Vec<(i32, i64)> = slice
        .updates
        .iter()
        .map(|u| {
            let box_id = match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
                Some(update::Kind::NewMessage(m)) => m.message.as_ref().map_or(0, |m| m.id),
                _ => 0,
            };
            (u.pts, box_id)
        })
        .collect();
    assert_eq!(served, [(1, 1), (2, 2)]);
    assert_eq!(slice.state.pts, 3);
    let rest = log::difference(&db.pool, ANN, 3, 10).await?;
    assert!(rest.updates.is_empty());
    Ok(())
}

fn read(event: u128, basis_pts: i32, max_id: i64, requested_max_id: i64) -> ReadRequest {
    ReadRequest {
        event_id: id(event),
        user_id: ANN,
        peer_user_id: BOB,
        basis_pts,
        read_max_id: 0,
        max_id,
        still_unread_count: 0,
        requested_max_id,
        date: 1_700_000_000,
        origin_auth_key_id: 7,
        traceparent: None,
    }
}

fn outcome(o: &ReadOutcome) -> (&'static str, i32, usize) {
    match o {
        ReadOutcome::Appended { pts, written } => ("appended", *pts, written.1.len()),
        ReadOutcome::Unchanged { pts } => ("unchanged", *pts, 0),
        ReadOutcome::BasisTooOld => ("basis too old", 0, 0),
        ReadOutcome::Recount { pts } => ("recount", *pts, 0),
    }
}

#[tokio::test]
async fn reads_are_logged_at_their_place_in_the_readers_log() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    assert_eq!(
        outcome(&log::append_read(&db.pool, &outbox, &read(100, 0, 1, 0)).await?),
        ("unchanged", 0, 0),
        "no log, nothing to read"
    );
    let mut last = LastPts::default();
    let events = vec![
        message_event(id(1), ANN, BOB, 1, false),
        message_event(id(2), ANN, BOB, 2, false),
    ];
    log::append(&db.pool, &outbox, events, 100, &mut last).await?;

    // (read, outcome, the rows handed on)
    let cases = [
        (read(101, 2, 1, 1), ("appended", 3, 2)),
        // The same read again: where it was logged, nothing handed on twice.
        (read(101, 2, 1, 1), ("appended", 3, 0)),
        // The watermark is there already.
        (read(102, 2, 1, 1), ("unchanged", 3, 0)),
        // A read of everything counted before message 2 covers it too.
        (read(103, 1, 1, 0), ("appended", 4, 2)),
    ];
    for (request, expected) in cases {
        let got = log::append_read(&db.pool, &outbox, &request).await?;
        assert_eq!(outcome(&got), expected, "read {}", request.event_id);
    }
    let difference = log::difference(&db.pool, ANN, 2, 10).await?;
    let reads: Vec<(i32, i64, i32)> = difference
        .updates
        .iter()
        .filter_map(|u| match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
            Some(update::Kind::ReadHistoryInbox(r)) => {
                Some((u.pts, r.max_id, r.still_unread_count))
            }
            _ => None,
        })
        .collect();
    assert_eq!(reads, [(3, 1, 0), (4, 2, 0)]);

    // The worker's remembered pts are stale now: its next append still follows the reads.
    let after = log::append(
        &db.pool,
        &outbox,
        vec![message_event(id(3), ANN, BOB, 3, false)],
        100,
        &mut last,
    )
    .await?;
    assert_eq!(pts_of(&after), [(ANN, 5, 1)]);
    assert_eq!(logged(&db, ANN).await?, [1, 2, 3, 4, 5]);
    Ok(())
}

#[tokio::test]
async fn a_read_is_counted_again_when_a_delete_since_its_basis_may_have_changed_the_count()
-> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let mut last = LastPts::default();
    let delete = |n: u128, ids: Vec<i64>| {
        event(
            id(n),
            ANN,
            ids.len() as i32,
            update::Kind::DeleteMessages(UpdateDeleteMessages { ids }),
        )
    };
    // pts 1..=3: Bob's messages 1, 2, 3 to Ann.
    let events = (1..=3)
        .map(|n| message_event(id(n), ANN, BOB, n as i64, false))
        .collect();
    log::append(&db.pool, &outbox, events, 100, &mut last).await?;
    // pts 4: message 3 (logged after a basis of 2) deleted; pts 5: message 2 (before it).
    log::append(&db.pool, &outbox, vec![delete(4, vec![3])], 100, &mut last).await?;
    // A read of everything counted at pts 2 (target 2): message 3 was logged and deleted
    // since, so it is not read past and not unread: the read stops at 2, nothing unread.
    let got = log::append_read(&db.pool, &outbox, &read(300, 2, 2, 0)).await?;
    assert_eq!(outcome(&got), ("appended", 5, 2));
    log::append(&db.pool, &outbox, vec![delete(5, vec![2])], 100, &mut last).await?;
    // A read counted at pts 2 (target 1): message 2 was applied by then and is deleted since,
    // above the target: only svc-dialogs knows whether it counted it; it counts again.
    let got = log::append_read(&db.pool, &outbox, &read(301, 2, 1, 1)).await?;
    assert_eq!(outcome(&got), ("recount", 6, 0));
    let difference = log::difference(&db.pool, ANN, 4, 10).await?;
    let reads: Vec<(i32, i64, i32)> = difference
        .updates
        .iter()
        .filter_map(|u| match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
            Some(update::Kind::ReadHistoryInbox(r)) => {
                Some((u.pts, r.max_id, r.still_unread_count))
            }
            _ => None,
        })
        .collect();
    assert_eq!(reads, [(5, 2, 0)]);
    Ok(())
}

#[tokio::test]
async fn a_read_too_far_behind_the_log_is_refused() -> anyhow::Result<()> {
    let (db, outbox) = schema().await?;
    let events = (1..=11)
        .map(|n| {
            event(
                id(n),
                ANN,
                1000,
                update::Kind::ReadHistoryInbox(UpdateReadHistoryInbox {
                    peer: Some(Peer::user(3)),
                    max_id: n as i64,
                    still_unread_count: 0,
                }),
            )
        })
        .collect();
    log::append(&db.pool, &outbox, events, 100_000, &mut LastPts::default()).await?;
    // (basis, outcome): at most MAX_READ_CATCH_UP updates are caught up with.
    let cases = [
        (0, ("basis too old", 0, 0)),
        (11_000 - log::MAX_READ_CATCH_UP, ("appended", 11_001, 2)),
    ];
    for (basis, expected) in cases {
        let got = log::append_read(&db.pool, &outbox, &read(200, basis, 1, 0)).await?;
        assert_eq!(outcome(&got), expected, "basis {basis}");
    }
    Ok(())
}
