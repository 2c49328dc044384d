//! svc-updates' Append as its producers use it: pts are assigned per user in input order, an
//! event repeated in a batch or appended again keeps its first pts, and the log and the
//! state agree afterwards. And the log's consumers: getDifference, reads brought up to their
//! place in the log, and svc-dialogs applying each user's log in pts order.

use anyhow::Context;
use oxigram_proto::{
    types::v1::{self as types, Peer, Update, UpdateReadHistoryInbox, UserEvent, update},
    updates::v1::{
        AppendRequest, GetDifferenceRequest, GetStateRequest, updates_client::UpdatesClient,
    },
};
use oxigram_tests::{Mode, System};
use tonic::transport::Channel;

fn difference_request(user_id: i64, pts: i32, limit: i32) -> GetDifferenceRequest {
    GetDifferenceRequest {
        user_id,
        request: Some(types::GetDifferenceRequest { pts, limit }),
    }
}

fn event(id: u128, user_id: i64, pts_count: i32) -> UserEvent {
    UserEvent {
        event_id: uuid::Uuid::from_u128(id).to_string(),
        user_id,
        pts_count,
        date: 1_700_000_000,
        update: Some(Update {
            kind: Some(update::Kind::ReadHistoryInbox(UpdateReadHistoryInbox {
                peer: Some(Peer::user(7)),
                max_id: id as i64,
                still_unread_count: 0,
            })),
        }),
        ..Default::default()
    }
}

/// (event id, user, pts, pts_count) of each appended event, in request order.
async fn append(
    updates: &mut UpdatesClient<Channel>,
    events: Vec<UserEvent>,
) -> anyhow::Result<Vec<(u128, i64, i32, i32)>> {
    let appended = updates
        .append(AppendRequest { events })
        .await?
        .into_inner()
        .appended;
    appended
        .into_iter()
        .map(|a| {
            Ok((
                uuid::Uuid::parse_str(&a.event_id)?.as_u128(),
                a.user_id,
                a.pts,
                a.pts_count,
            ))
        })
        .collect()
}

/// svc-updates' internal API, as the producers call it.
async fn updates_client(system: &System) -> anyhow::Result<UpdatesClient<Channel>> {
    let endpoint = system.config.services.updates.endpoint.clone();
    let channel = tonic::transport::Endpoint::from_shared(endpoint)?
        .connect()
        .await?;
    Ok(UpdatesClient::new(channel))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_gives_each_event_one_pts_per_user_in_order() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let mut updates = updates_client(&system).await?;
    let (ann, ben, cat) = (9001, 9002, 9003);

    // A batch with an event twice and an event that moves pts by two.
    let first = append(
        &mut updates,
        vec![
            event(1, ann, 1),
            event(2, ann, 2),
            event(1, ann, 1),
            event(3, ben, 1),
            event(4, ann, 1),
        ],
    )
    .await?;
    assert_eq!(
        first,
        [
            (1, ann, 1, 1),
            (2, ann, 3, 2),
            (1, ann, 1, 1),
            (3, ben, 1, 1),
            (4, ann, 4, 1),
        ]
    );

    // Appended again (a replay of the outbox), beside new events: the old keep their pts, and
    // only the new move the users' pts.
    let second = append(
        &mut updates,
        vec![
            event(2, ann, 2),
            event(5, cat, 3),
            event(6, ann, 1),
            event(3, ben, 1),
        ],
    )
    .await?;
    assert_eq!(
        second,
        [
            (2, ann, 3, 2),
            (5, cat, 3, 3),
            (6, ann, 5, 1),
            (3, ben, 1, 1)
        ]
    );
    // Nothing new at all: nothing moves.
    let third = append(&mut updates, vec![event(6, ann, 1), event(1, ann, 1)]).await?;
    assert_eq!(third, [(6, ann, 5, 1), (1, ann, 1, 1)]);

    for (user, pts) in [(ann, 5), (ben, 1), (cat, 3)] {
        let state = updates
            .get_state(GetStateRequest { user_id: user })
            .await?
            .into_inner();
        assert_eq!(state.pts, pts, "user {user}");
    }
    let log = updates
        .get_difference(difference_request(ann, 0, 100))
        .await?
        .into_inner();
    assert_eq!(
        log.updates
            .iter()
            .map(|u| (u.pts, u.pts_count))
            .collect::<Vec<_>>(),
        [(1, 1), (3, 2), (4, 1), (5, 1)],
        "one log row per event"
    );
    Ok(())
}

/// A worker appends a batch of users it remembers in one statement. When their pts moved
/// elsewhere meanwhile (another instance of svc-updates), that statement must write nothing,
/// and the batch must continue from the pts the database holds: never go back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_continues_from_pts_moved_by_another_writer() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let mut updates = updates_client(&system).await?;
    let (ann, ben) = (9101, 9102);

    append(&mut updates, vec![event(1, ann, 1), event(2, ben, 1)]).await?;
    // Both remembered now: this batch is the one-statement kind.
    let remembered = append(&mut updates, vec![event(3, ann, 1), event(4, ben, 2)]).await?;
    assert_eq!(remembered, [(3, ann, 2, 1), (4, ben, 3, 2)]);

    // Another writer moves Ann's pts past what this worker remembers.
    let mut db = system.db().await?;
    sqlx::query("UPDATE updates.user_state SET pts = pts + 10 WHERE user_id = $1")
        .bind(ann)
        .execute(&mut db)
        .await?;
    let after = append(&mut updates, vec![event(5, ben, 1), event(6, ann, 1)]).await?;
    assert_eq!(
        after,
        [(5, ben, 4, 1), (6, ann, 13, 1)],
        "Ann continues from 12, and Ben's part of the batch is not written twice"
    );
    let rows: Vec<(i64, i32)> = sqlx::query_as(
        "SELECT user_id, pts FROM updates.update_log WHERE user_id IN ($1, $2) ORDER BY 1, 2",
    )
    .bind(ann)
    .bind(ben)
    .fetch_all(&mut db)
    .await?;
    assert_eq!(
        rows,
        [(ann, 1), (ann, 2), (ann, 13), (ben, 1), (ben, 3), (ben, 4)]
    );
    for (user, pts) in [(ann, 13), (ben, 4)] {
        let state = updates
            .get_state(GetStateRequest { user_id: user })
            .await?
            .into_inner();
        assert_eq!(state.pts, pts, "user {user}");
    }
    Ok(())
}

/// getDifference answers from one snapshot: while appends commit all the time, the state it
/// returns is never behind the last update it returns, and a slice's state is exactly its last
/// update's pts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_difference_never_answers_a_state_behind_its_updates() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let mut appender = updates_client(&system).await?;
    let mut reader = appender.clone();
    let user = 9201;
    append(&mut appender, vec![event(1, user, 1)]).await?;
    let stop = tokio_util::sync::CancellationToken::new();
    let appending = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut id = 10u128;
            while !stop.is_cancelled() {
                let batch = (0..4).map(|i| event(id + i, user, 1)).collect();
                append(&mut appender, batch).await?;
                id += 4;
            }
            anyhow::Ok(())
        })
    };
    let mut checked = 0;
    for round in 0..400 {
        // Older starting points too, so some answers are slices.
        let (pts, limit) = if round % 2 == 0 { (0, 1000) } else { (0, 7) };
        let d = reader
            .get_difference(difference_request(user, pts, limit))
            .await?
            .into_inner();
        let state = d.state.map_or(0, |s| s.pts);
        if let Some(last) = d.updates.last() {
            checked += 1;
            assert!(
                state >= last.pts,
                "round {round}: state pts {state} is behind the last update's pts {}",
                last.pts
            );
            if d.is_slice {
                assert_eq!(
                    state, last.pts,
                    "round {round}: a slice ends at its last update"
                );
            }
        }
    }
    stop.cancel();
    appending.await??;
    assert!(checked > 300, "answers with updates: {checked}");
    Ok(())
}

/// AppendRead brings a read counted against an older position of the reader's log up to its
/// place: messages of the peer logged since count as unread above its max_id, a read of
/// everything reaches them, and a read logged since keeps the watermark from going back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_is_brought_up_to_its_place_in_the_log() -> anyhow::Result<()> {
    use oxigram_proto::types::v1::{Message, UpdateNewMessage};
    use oxigram_proto::updates::v1::AppendReadRequest;

    let system = System::start(Mode::OneProcess).await?;
    let mut updates = updates_client(&system).await?;
    let (reader, peer) = (9301, 9302);
    let incoming = |n: u128, id: i64| UserEvent {
        event_id: uuid::Uuid::from_u128(n).to_string(),
        user_id: reader,
        pts_count: 1,
        date: 1_700_000_000,
        update: Some(Update {
            kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                message: Some(Message {
                    id,
                    peer_id: Some(Peer::user(peer)),
                    from_user_id: peer,
                    ..Default::default()
                }),
                random_id: 0,
            })),
        }),
        ..Default::default()
    };
    // Messages 1..=3 at pts 1..=3; svc-dialogs counted at pts 1 (it knew message 1 only).
    append(
        &mut updates,
        vec![incoming(1, 1), incoming(2, 2), incoming(3, 3)],
    )
    .await?;
    let read = |requested_max_id: i64, read_max_id: i64, event: u128| AppendReadRequest {
        event_id: uuid::Uuid::from_u128(event).to_string(),
        user_id: reader,
        peer_user_id: peer,
        basis_pts: 1,
        read_max_id,
        max_id: 1,
        still_unread_count: 0,
        requested_max_id,
        date: 1_700_000_001,
        origin_auth_key_id: 0,
    };
    let logged_read = |updates: &mut UpdatesClient<Channel>, pts: i32| {
        let mut updates = updates.clone();
        async move {
            let d = updates
                .get_difference(difference_request(reader, pts - 1, 1))
                .await?
                .into_inner();
            match d
                .updates
                .first()
                .and_then(|u| u.update.clone())
                .and_then(|u| u.kind)
            {
                Some(update::Kind::ReadHistoryInbox(r)) => {
                    anyhow::Ok((r.max_id, r.still_unread_count))
                }
                other => anyhow::bail!("expected a read at pts {pts}, got {other:?}"),
            }
        }
    };

    // Up to message 1: messages 2 and 3, logged after the basis, stay unread.
    let up_to_one = updates.append_read(read(1, 0, 100)).await?.into_inner();
    assert!(up_to_one.appended);
    assert_eq!(up_to_one.pts, 4);
    assert_eq!(logged_read(&mut updates, 4).await?, (1, 2));
    // The same read again (its answer was lost): the same pts, nothing logged twice.
    let again = updates.append_read(read(1, 0, 100)).await?.into_inner();
    assert_eq!((again.appended, again.pts), (true, 4));
    // Everything, counted at the same old basis: it reaches message 3, and nothing stays unread.
    let everything = updates.append_read(read(0, 0, 101)).await?.into_inner();
    assert_eq!((everything.appended, everything.pts), (true, 5));
    assert_eq!(logged_read(&mut updates, 5).await?, (3, 0));
    // Up to message 2, still counted at the old basis: the reads since went further, so the
    // watermark stays and nothing is logged.
    let behind = updates.append_read(read(2, 0, 102)).await?.into_inner();
    assert_eq!((behind.appended, behind.pts), (false, 5));
    Ok(())
}

/// svc-dialogs applies each user's log in pts order, each update once: events ahead of a gap
/// are refused until the missing ones arrive, and replays change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialogs_apply_a_users_log_in_pts_order_once() -> anyhow::Result<()> {
    use oxigram_proto::dialogs::v1::{
        ApplyEventsRequest, GetDialogsRequest, dialogs_client::DialogsClient,
    };
    use oxigram_proto::types::v1::{Message, UpdateNewMessage};

    let system = System::start(Mode::OneProcess).await?;
    let channel =
        tonic::transport::Endpoint::from_shared(system.config.services.dialogs.endpoint.clone())?
            .connect()
            .await?;
    let mut dialogs = DialogsClient::new(channel);
    let (owner, peer) = (9401, 9402);
    let logged = |pts: i32, id: i64| UserEvent {
        event_id: uuid::Uuid::from_u128(9400 + pts as u128).to_string(),
        user_id: owner,
        pts_count: 1,
        pts,
        date: 1_700_000_000 + i64::from(pts),
        update: Some(Update {
            kind: Some(update::Kind::NewMessage(UpdateNewMessage {
                message: Some(Message {
                    id,
                    peer_id: Some(Peer::user(peer)),
                    from_user_id: peer,
                    date: 1_700_000_000 + i64::from(pts),
                    ..Default::default()
                }),
                random_id: 0,
            })),
        }),
        ..Default::default()
    };
    let unread = |dialogs: &mut DialogsClient<Channel>| {
        let mut dialogs = dialogs.clone();
        async move {
            let page = dialogs
                .get_dialogs(GetDialogsRequest {
                    owner_id: owner,
                    request: Some(types::GetDialogsRequest {
                        limit: 10,
                        ..Default::default()
                    }),
                })
                .await?
                .into_inner();
            anyhow::Ok(
                page.dialogs
                    .first()
                    .map(|d| (d.top_message_id, d.unread_count)),
            )
        }
    };

    // pts 2 before pts 1: held back, nothing applied.
    let ahead = dialogs
        .apply_events(ApplyEventsRequest {
            events: vec![logged(2, 2)],
        })
        .await;
    let refused = ahead.err().context("an event ahead of a gap is refused")?;
    assert_eq!(refused.code(), tonic::Code::Unavailable);
    assert_eq!(
        oxigram_errors::code_of(&refused).as_deref(),
        Some("EVENTS_AHEAD_OF_GAP"),
        "held back, to be delivered again without a growing backoff"
    );
    assert_eq!(unread(&mut dialogs).await?, None);
    // Both, out of order and with a repeat: applied in pts order, once each.
    let applied = dialogs
        .apply_events(ApplyEventsRequest {
            events: vec![logged(2, 2), logged(1, 1), logged(2, 2)],
        })
        .await?
        .into_inner()
        .applied;
    assert_eq!(applied, 2);
    assert_eq!(unread(&mut dialogs).await?, Some((2, 2)));
    // A replay of both, and the next one: only the next one counts.
    let applied = dialogs
        .apply_events(ApplyEventsRequest {
            events: vec![logged(1, 1), logged(2, 2), logged(3, 3)],
        })
        .await?
        .into_inner()
        .applied;
    assert_eq!(applied, 1);
    assert_eq!(unread(&mut dialogs).await?, Some((3, 3)));
    Ok(())
}
