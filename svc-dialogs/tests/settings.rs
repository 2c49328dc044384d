//! svc-dialogs' dialog settings against its own migrated schema: each settings update of a
//! user's log applied by the projection (pins and their order and limit, folders, the unread
//! mark and the read that takes it away, notify settings, drafts and the draft-cleared update
//! a sent message makes, the hidden peer settings bar, dialog filters and their order), folder pages with pinned dialogs
//! first and their count, and the pages of dialog filters by their rules.

use oxigram_outbox::{Outbox, RelayConfig};
use oxigram_proto::{
    dialog_rules::{MAX_PINNED_DIALOGS, MUTE_FOREVER},
    types::v1::{
        Dialog, DialogFilter, DraftMessage, FolderPeer, Message, Peer, PeerNotifySettings, Update,
        UpdateContact, UpdateDialogFilter, UpdateDialogFilterOrder, UpdateDialogPinned,
        UpdateDialogUnreadMark, UpdateDraftMessage, UpdateFolderPeers, UpdateNewMessage,
        UpdateNotifySettings, UpdatePeerSettingsBarHidden, UpdatePinnedDialogs,
        UpdateReadHistoryInbox, UserEvent, update,
    },
};
use oxigram_testkit::store::{self, Migrated};
use prost::Message as _;
use svc_dialogs::{
    filters::{self, Offset},
    outbound::{TO_UPDATES, draft_cleared_event_id},
    projection,
    store::{self as dialogs, FIRST_KEY},
};

const OWNER: i64 = 1;

struct Db {
    schema: Migrated,
    outbox: Outbox,
    /// The owner's next pts.
    pts: i32,
    /// The events the last application made for svc-updates.
    derived: Vec<UserEvent>,
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
    Ok(Db {
        schema,
        outbox,
        pts: 1,
        derived: Vec::new(),
    })
}

impl Db {
    /// Applies the owner's next update; answers its event id.
    async fn apply(&mut self, kind: update::Kind) -> anyhow::Result<uuid::Uuid> {
        let id = uuid::Uuid::new_v4();
        let e = UserEvent {
            event_id: id.to_string(),
            user_id: OWNER,
            pts: self.pts,
            pts_count: 1,
            date: 1_000 + i64::from(self.pts),
            update: Some(Update { kind: Some(kind) }),
            ..Default::default()
        };
        self.pts += 1;
        let applied = projection::apply(&self.schema.pool, &self.outbox, vec![e]).await?;
        self.derived = applied
            .derived
            .1
            .iter()
            .map(|row| {
                assert_eq!(row.destination, TO_UPDATES);
                UserEvent::decode(row.payload.as_slice())
            })
            .collect::<Result<_, _>>()?;
        Ok(id)
    }

    /// A message of the dialog with `peer`, box id `id`, dated `date`.
    async fn message(
        &mut self,
        peer: i64,
        id: i64,
        date: i64,
        out: bool,
    ) -> anyhow::Result<uuid::Uuid> {
        self.apply(update::Kind::NewMessage(UpdateNewMessage {
            message: Some(Message {
                id,
                peer_id: Some(Peer::user(peer)),
                from_user_id: if out { OWNER } else { peer },
                out,
                date,
                ..Default::default()
            }),
            random_id: 0,
        }))
        .await
    }

    async fn pin(&mut self, peer: i64, pinned: bool) -> anyhow::Result<()> {
        self.apply(update::Kind::DialogPinned(UpdateDialogPinned {
            peer: Some(Peer::user(peer)),
            pinned,
        }))
        .await?;
        Ok(())
    }

    async fn page(&self, folder: i32) -> anyhow::Result<Vec<Dialog>> {
        Ok(dialogs::page(&self.schema.pool, OWNER, folder, FIRST_KEY, 100, false).await?)
    }

    /// The peers of a folder's first page, and which of them are pinned.
    async fn listed(&self, folder: i32) -> anyhow::Result<Vec<(i64, bool)>> {
        Ok(self
            .page(folder)
            .await?
            .iter()
            .map(|d| (d.peer_user(), d.pinned))
            .collect())
    }

    async fn dialog(&self, peer: i64) -> anyhow::Result<Option<Dialog>> {
        Ok(dialogs::peer_dialogs(&self.schema.pool, OWNER, &[peer])
            .await?
            .pop())
    }
}

/// Five dialogs, peer 10 + i with top message i dated 100 * i.
async fn five_dialogs(db: &mut Db) -> anyhow::Result<()> {
    for i in 1..=5 {
        db.message(10 + i, i, 100 * i, false).await?;
    }
    Ok(())
}

#[tokio::test]
async fn pins_go_to_the_head_of_their_folder_and_keep_an_order() -> anyhow::Result<()> {
    let mut db = schema().await?;
    five_dialogs(&mut db).await?;
    db.pin(12, true).await?;
    db.pin(11, true).await?;
    // Pinned already: stays where it is.
    db.pin(12, true).await?;
    assert_eq!(
        db.listed(0).await?,
        [
            (11, true),
            (12, true),
            (15, false),
            (14, false),
            (13, false)
        ]
    );
    // A reorder is the exact order: 13 joins, 12 is left out and unpinned.
    db.apply(update::Kind::PinnedDialogs(UpdatePinnedDialogs {
        folder_id: 0,
        order: vec![Peer::user(13), Peer::user(11)],
    }))
    .await?;
    assert_eq!(
        db.listed(0).await?,
        [
            (13, true),
            (11, true),
            (15, false),
            (14, false),
            (12, false)
        ]
    );
    db.pin(13, false).await?;
    assert_eq!(db.listed(0).await?[0], (11, true));
    // Archiving unpins, and the archive is a list of its own.
    db.apply(update::Kind::FolderPeers(UpdateFolderPeers {
        folder_peers: vec![FolderPeer {
            peer: Some(Peer::user(11)),
            folder_id: 1,
        }],
    }))
    .await?;
    assert_eq!(db.listed(1).await?, [(11, false)]);
    assert_eq!(dialogs::folder_count(&db.schema.pool, OWNER, 0).await?, 4);
    assert_eq!(dialogs::folder_count(&db.schema.pool, OWNER, 1).await?, 1);
    assert!(
        db.listed(0)
            .await?
            .iter()
            .all(|(p, pinned)| *p != 11 && !pinned)
    );
    Ok(())
}

#[tokio::test]
async fn a_folder_pins_at_most_its_limit() -> anyhow::Result<()> {
    let mut db = schema().await?;
    let n = MAX_PINNED_DIALOGS as i64 + 1;
    for i in 1..=n {
        db.message(100 + i, i, i, false).await?;
    }
    for i in 1..=n {
        db.pin(100 + i, true).await?;
    }
    let page = db.page(0).await?;
    let pinned: Vec<i64> = page
        .iter()
        .filter(|d| d.pinned)
        .map(Dialog::peer_user)
        .collect();
    assert_eq!(pinned.len(), MAX_PINNED_DIALOGS);
    assert!(
        !pinned.contains(&(100 + n)),
        "the pin past the limit changed nothing"
    );
    assert_eq!(
        pinned[0],
        100 + n - 1,
        "the last pin that fitted is at the head"
    );
    Ok(())
}

#[tokio::test]
async fn pages_seek_through_the_pinned_dialogs_then_the_rest() -> anyhow::Result<()> {
    let mut db = schema().await?;
    five_dialogs(&mut db).await?;
    db.pin(11, true).await?;
    db.pin(12, true).await?;
    let pool = &db.schema.pool;
    let mut seen = Vec::new();
    let mut after = FIRST_KEY;
    loop {
        let page = dialogs::page(pool, OWNER, 0, after, 1, false).await?;
        let Some(last) = page.last() else { break };
        let rank = if last.pinned {
            dialogs::pinned_rank(pool, OWNER, 0, last.peer_user()).await?
        } else {
            0
        };
        after = (
            rank,
            last.top_message_date,
            last.top_message_id,
            last.peer_user(),
        );
        seen.push(last.peer_user());
    }
    assert_eq!(seen, [12, 11, 15, 14, 13]);
    Ok(())
}

#[tokio::test]
async fn the_unread_mark_stays_until_a_read() -> anyhow::Result<()> {
    let mut db = schema().await?;
    five_dialogs(&mut db).await?;
    db.apply(update::Kind::DialogUnreadMark(UpdateDialogUnreadMark {
        peer: Some(Peer::user(12)),
        unread: true,
    }))
    .await?;
    assert!(db.dialog(12).await?.is_some_and(|d| d.unread_mark));
    // A new message leaves it.
    db.message(12, 6, 600, false).await?;
    assert!(db.dialog(12).await?.is_some_and(|d| d.unread_mark));
    db.apply(update::Kind::ReadHistoryInbox(UpdateReadHistoryInbox {
        peer: Some(Peer::user(12)),
        max_id: 6,
        still_unread_count: 0,
    }))
    .await?;
    let d = db.dialog(12).await?;
    assert_eq!(d.map(|d| (d.unread_mark, d.unread_count)), Some((false, 0)));
    Ok(())
}

#[tokio::test]
async fn notify_settings_are_kept_per_dialog() -> anyhow::Result<()> {
    let mut db = schema().await?;
    five_dialogs(&mut db).await?;
    let muted = PeerNotifySettings {
        show_previews: Some(false),
        silent: None,
        mute_until: 5_000,
    };
    db.apply(update::Kind::NotifySettings(UpdateNotifySettings {
        peer: Some(Peer::user(13)),
        settings: Some(muted),
    }))
    .await?;
    let pool = &db.schema.pool;
    assert_eq!(dialogs::notify_settings(pool, OWNER, 13).await?, muted);
    assert_eq!(
        db.dialog(13).await?.and_then(|d| d.notify_settings),
        Some(muted)
    );
    // Defaults elsewhere, also for a peer without a dialog.
    assert_eq!(
        dialogs::notify_settings(pool, OWNER, 14).await?,
        PeerNotifySettings::default()
    );
    assert_eq!(
        dialogs::notify_settings(pool, OWNER, 99).await?,
        PeerNotifySettings::default()
    );
    assert_eq!(db.dialog(14).await?.and_then(|d| d.notify_settings), None);
    Ok(())
}

async fn hide_bar(db: &mut Db, peer: i64) -> anyhow::Result<()> {
    db.apply(update::Kind::PeerSettingsBarHidden(
        UpdatePeerSettingsBarHidden {
            peer: Some(Peer::user(peer)),
        },
    ))
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_hidden_settings_bar_stays_hidden_also_before_the_first_message() -> anyhow::Result<()> {
    let mut db = schema().await?;
    five_dialogs(&mut db).await?;
    let pool = &db.schema.pool;
    assert_eq!(
        dialogs::settings_bar(pool, OWNER, 12).await?,
        Some((true, false, false))
    );
    hide_bar(&mut db, 12).await?;
    // (peer wrote, owner wrote, hidden). A dialog without a message yet keeps it for when one
    // comes.
    hide_bar(&mut db, 20).await?;
    db.message(20, 6, 600, false).await?;
    let pool = &db.schema.pool;
    for peer in [12, 20] {
        assert_eq!(
            dialogs::settings_bar(pool, OWNER, peer).await?,
            Some((true, false, true)),
            "peer {peer}"
        );
        assert!(
            db.dialog(peer)
                .await?
                .is_some_and(|d| d.settings_bar_hidden)
        );
    }
    assert!(db.dialog(13).await?.is_some_and(|d| !d.settings_bar_hidden));
    Ok(())
}

fn draft(text: &str) -> update::Kind {
    update::Kind::DraftMessage(UpdateDraftMessage {
        peer: Some(Peer::user(12)),
        draft: Some(DraftMessage {
            text: text.into(),
            date: 50,
            ..Default::default()
        }),
        clears_pts: 0,
    })
}

#[tokio::test]
async fn a_sent_message_clears_the_draft_it_found_and_only_that_one() -> anyhow::Result<()> {
    let mut db = schema().await?;
    five_dialogs(&mut db).await?;
    let saved_at = db.pts;
    db.apply(draft("hello")).await?;
    let d = db.dialog(12).await?.and_then(|d| d.draft);
    assert_eq!(
        d.map(|d| (d.text, d.pts)),
        Some(("hello".to_owned(), saved_at))
    );
    // A message of someone else, or to another dialog, leaves it.
    db.message(12, 6, 600, false).await?;
    assert!(db.derived.is_empty());
    db.message(13, 7, 700, true).await?;
    assert!(db.derived.is_empty());
    // The owner sends in the dialog: the draft-cleared update, for her log, names the draft.
    let sent = db.message(12, 8, 800, true).await?;
    let events = db.derived.clone();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event_id, draft_cleared_event_id(sent).to_string());
    assert_eq!(events[0].user_id, OWNER);
    let Some(update::Kind::DraftMessage(cleared)) = events[0].update.clone().and_then(|u| u.kind)
    else {
        anyhow::bail!("not a draft update: {:?}", events[0]);
    };
    assert_eq!(
        (cleared.draft.clone(), cleared.clears_pts),
        (None, saved_at)
    );
    // A draft saved before the clear comes back through the log stays.
    db.apply(draft("written after the send")).await?;
    db.apply(update::Kind::DraftMessage(cleared.clone()))
        .await?;
    let kept = db.dialog(12).await?.and_then(|d| d.draft).map(|d| d.text);
    assert_eq!(kept.as_deref(), Some("written after the send"));
    // The clear of that draft's pts takes it away.
    let newer = db
        .dialog(12)
        .await?
        .and_then(|d| d.draft)
        .map_or(0, |d| d.pts);
    db.apply(update::Kind::DraftMessage(UpdateDraftMessage {
        clears_pts: newer,
        ..cleared
    }))
    .await?;
    assert_eq!(db.dialog(12).await?.and_then(|d| d.draft), None);
    Ok(())
}

fn filter(id: i32, title: &str) -> DialogFilter {
    DialogFilter {
        id,
        title: title.into(),
        non_contacts: true,
        ..Default::default()
    }
}

async fn save_filter(db: &mut Db, f: DialogFilter) -> anyhow::Result<()> {
    db.apply(update::Kind::DialogFilter(UpdateDialogFilter {
        id: f.id,
        filter: Some(f),
    }))
    .await?;
    Ok(())
}

#[tokio::test]
async fn filters_are_made_edited_ordered_and_deleted() -> anyhow::Result<()> {
    let mut db = schema().await?;
    for (id, title) in [(2, "a"), (3, "b"), (4, "c")] {
        save_filter(&mut db, filter(id, title)).await?;
    }
    // An edit keeps the filter's place.
    save_filter(&mut db, filter(2, "a2")).await?;
    db.apply(update::Kind::DialogFilterOrder(UpdateDialogFilterOrder {
        order: vec![4, 2],
    }))
    .await?;
    let pool = &db.schema.pool;
    let titles = |fs: Vec<DialogFilter>| -> Vec<(i32, String)> {
        fs.into_iter().map(|f| (f.id, f.title)).collect()
    };
    assert_eq!(
        titles(filters::filters(pool, OWNER).await?),
        [(4, "c".into()), (2, "a2".into()), (3, "b".into())]
    );
    db.apply(update::Kind::DialogFilter(UpdateDialogFilter {
        id: 2,
        filter: None,
    }))
    .await?;
    let pool = &db.schema.pool;
    assert_eq!(
        titles(filters::filters(pool, OWNER).await?),
        [(4, "c".into()), (3, "b".into())]
    );
    assert!(filters::filters(pool, OWNER + 1).await?.is_empty());
    Ok(())
}

/// Makes the owner's contacts exactly `contacts` through her log's contact updates: those she
/// has and `contacts` leaves out deleted, the others added.
async fn set_contacts(db: &mut Db, contacts: &[i64]) -> anyhow::Result<()> {
    let kept: Vec<i64> =
        sqlx::query_scalar("SELECT peer_user_id FROM dialog_contacts WHERE owner_id = $1")
            .bind(OWNER)
            .fetch_all(&db.schema.pool)
            .await?;
    let changes = kept
        .iter()
        .filter(|p| !contacts.contains(p))
        .map(|p| (*p, true))
        .chain(
            contacts
                .iter()
                .filter(|p| !kept.contains(p))
                .map(|p| (*p, false)),
        );
    for (user_id, deleted) in changes.collect::<Vec<_>>() {
        db.apply(update::Kind::Contact(UpdateContact {
            user_id,
            first_name: if deleted { String::new() } else { "C".into() },
            deleted,
            ..Default::default()
        }))
        .await?;
    }
    Ok(())
}

/// The peers of a filter's whole list, page after page of `limit`, and its count, with the
/// owner's contacts made `contacts` first.
async fn filter_pages(
    db: &mut Db,
    f: &DialogFilter,
    contacts: &[i64],
    limit: i32,
) -> anyhow::Result<(Vec<(i64, bool)>, i32)> {
    set_contacts(db, contacts).await?;
    let pool = &db.schema.pool;
    let (mut seen, mut offset, mut count) = (Vec::new(), Offset::First, None);
    loop {
        let (page, total) = filters::page(pool, OWNER, f, offset, limit).await?;
        // Counted on the first page; 0 on later ones.
        match count {
            None => count = Some(total),
            Some(_) => assert_eq!(total, 0, "a later page is not counted"),
        }
        let Some(last) = page.last() else {
            break;
        };
        offset = if last.pinned {
            Offset::AfterPinned(last.peer_user())
        } else {
            Offset::After(last.top_message_date, last.top_message_id, last.peer_user())
        };
        seen.extend(page.iter().map(|d| (d.peer_user(), d.pinned)));
    }
    Ok((seen, count.unwrap_or(0)))
}

#[tokio::test]
async fn a_filter_lists_its_pinned_peers_then_what_its_rules_take() -> anyhow::Result<()> {
    let mut db = schema().await?;
    five_dialogs(&mut db).await?;
    // 11 is read, 12 muted for good, 13 archived; 14 and 15 unread.
    db.apply(update::Kind::ReadHistoryInbox(UpdateReadHistoryInbox {
        peer: Some(Peer::user(11)),
        max_id: 1,
        still_unread_count: 0,
    }))
    .await?;
    db.apply(update::Kind::NotifySettings(UpdateNotifySettings {
        peer: Some(Peer::user(12)),
        settings: Some(PeerNotifySettings {
            mute_until: i64::from(i32::MAX),
            ..Default::default()
        }),
    }))
    .await?;
    db.apply(update::Kind::FolderPeers(UpdateFolderPeers {
        folder_peers: vec![FolderPeer {
            peer: Some(Peer::user(13)),
            folder_id: 1,
        }],
    }))
    .await?;
    let everyone = DialogFilter {
        id: 2,
        title: "all".into(),
        contacts: true,
        non_contacts: true,
        ..Default::default()
    };
    // (case, filter, the owner's contacts, the peers listed and whether pinned)
    type Case<'a> = (&'a str, DialogFilter, &'a [i64], Vec<(i64, bool)>);
    let table: Vec<Case> = vec![
        (
            "every private chat, newest first",
            everyone.clone(),
            &[],
            vec![
                (15, false),
                (14, false),
                (13, false),
                (12, false),
                (11, false),
            ],
        ),
        (
            "pinned peers first in their order, excluded peers never",
            DialogFilter {
                pinned_peers: vec![Peer::user(11), Peer::user(14)],
                exclude_peers: vec![Peer::user(15)],
                ..everyone.clone()
            },
            &[],
            vec![(11, true), (14, true), (13, false), (12, false)],
        ),
        (
            "no muted, read or archived dialog",
            DialogFilter {
                exclude_muted: true,
                exclude_read: true,
                exclude_archived: true,
                ..everyone.clone()
            },
            &[],
            vec![(15, false), (14, false)],
        ),
        (
            "an included peer whatever the exclusions say",
            DialogFilter {
                contacts: false,
                non_contacts: false,
                include_peers: vec![Peer::user(12), Peer::user(11)],
                exclude_muted: true,
                exclude_read: true,
                ..everyone.clone()
            },
            &[],
            vec![(12, false), (11, false)],
        ),
        (
            "contacts only",
            DialogFilter {
                non_contacts: false,
                ..everyone.clone()
            },
            &[11, 14, 99],
            vec![(14, false), (11, false)],
        ),
        (
            "non-contacts only",
            DialogFilter {
                contacts: false,
                ..everyone.clone()
            },
            &[11, 14, 99],
            vec![(15, false), (13, false), (12, false)],
        ),
    ];
    for (name, f, contacts, expected) in table {
        for limit in [1, 2, 100] {
            let (seen, count) = filter_pages(&mut db, &f, contacts, limit).await?;
            assert_eq!(seen, expected, "{name}, pages of {limit}");
            assert_eq!(count as usize, expected.len(), "{name}: count");
        }
    }
    Ok(())
}

/// A small deterministic generator (no seed crate for a test's draws).
struct Draws(u64);

impl Draws {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }

    fn peers(&mut self, of: &[i64], n: u64) -> Vec<i64> {
        let mut picked: Vec<i64> = (0..n)
            .map(|_| of[self.below(of.len() as u64) as usize])
            .collect();
        picked.dedup();
        picked
    }
}

/// The counts kept per owner (folders, and filters of every rule kind, timed mutes ahead and
/// past included) say what the pages hold, whatever the dialogs' state.
#[tokio::test]
async fn a_dialog_follows_its_peer_in_and_out_of_the_contacts() -> anyhow::Result<()> {
    let mut db = schema().await?;
    let contact = |user_id: i64, first_name: &str, deleted: bool| {
        update::Kind::Contact(UpdateContact {
            user_id,
            first_name: first_name.into(),
            deleted,
            ..Default::default()
        })
    };
    let contacts = DialogFilter {
        id: 2,
        title: "contacts".into(),
        contacts: true,
        ..Default::default()
    };
    let others = DialogFilter {
        id: 3,
        title: "others".into(),
        non_contacts: true,
        ..Default::default()
    };
    let pool = db.schema.pool.clone();
    let first_page = |f: DialogFilter| {
        let pool = pool.clone();
        async move {
            let (page, count) = filters::page(&pool, OWNER, &f, Offset::First, 100).await?;
            let peers: Vec<i64> = page.iter().map(Dialog::peer_user).collect();
            anyhow::Ok((peers, count))
        }
    };
    // A contact kept before the first message: the dialog the message makes knows it.
    db.apply(contact(21, "Ann", false)).await?;
    db.message(21, 1, 100, false).await?;
    db.message(22, 2, 101, false).await?;
    assert_eq!(first_page(contacts.clone()).await?, (vec![21], 1));
    assert_eq!(first_page(others.clone()).await?, (vec![22], 1));
    // Renamed, still a contact; then deleted, one of the others.
    db.apply(contact(21, "Anna", false)).await?;
    assert_eq!(first_page(contacts.clone()).await?, (vec![21], 1));
    db.apply(contact(21, "", true)).await?;
    assert_eq!(first_page(contacts.clone()).await?, (vec![], 0));
    assert_eq!(first_page(others.clone()).await?, (vec![22, 21], 2));
    // Kept again after the dialog exists.
    db.apply(contact(22, "Bob", false)).await?;
    assert_eq!(first_page(contacts).await?, (vec![22], 1));
    assert_eq!(first_page(others).await?, (vec![21], 1));
    Ok(())
}

#[tokio::test]
async fn counts_kept_per_list_are_what_the_pages_hold() -> anyhow::Result<()> {
    let mut db = schema().await?;
    let mut d = Draws(0x5eed);
    let now = chrono::Utc::now().timestamp();
    let peers: Vec<i64> = (100..140).collect();
    for (i, peer) in peers.iter().enumerate() {
        let id = i as i64 + 1;
        db.message(*peer, id, 1_000 + id, d.below(3) == 0).await?;
        if d.below(3) == 0 {
            db.apply(update::Kind::ReadHistoryInbox(UpdateReadHistoryInbox {
                peer: Some(Peer::user(*peer)),
                max_id: id,
                still_unread_count: 0,
            }))
            .await?;
        }
        let mute_until = [0, now - 600, now + 600, MUTE_FOREVER][d.below(4) as usize];
        if mute_until != 0 {
            db.apply(update::Kind::NotifySettings(UpdateNotifySettings {
                peer: Some(Peer::user(*peer)),
                settings: Some(PeerNotifySettings {
                    mute_until,
                    ..Default::default()
                }),
            }))
            .await?;
        }
        if d.below(5) == 0 {
            db.apply(update::Kind::DialogUnreadMark(UpdateDialogUnreadMark {
                peer: Some(Peer::user(*peer)),
                unread: true,
            }))
            .await?;
        }
        if d.below(4) == 0 {
            db.apply(update::Kind::FolderPeers(UpdateFolderPeers {
                folder_peers: vec![FolderPeer {
                    peer: Some(Peer::user(*peer)),
                    folder_id: 1,
                }],
            }))
            .await?;
        }
    }
    // A setting of a dialog without a message counts nowhere.
    db.apply(update::Kind::DialogUnreadMark(UpdateDialogUnreadMark {
        peer: Some(Peer::user(999)),
        unread: true,
    }))
    .await?;
    let pool = &db.schema.pool;
    for folder in [0, 1] {
        let listed = dialogs::page(pool, OWNER, folder, FIRST_KEY, 100, false).await?;
        assert_eq!(
            dialogs::folder_count(pool, OWNER, folder).await? as usize,
            listed.len(),
            "folder {folder}"
        );
    }
    for case in 0..60 {
        let contacts = d.peers(&peers, 15);
        let (n_pinned, n_included, n_excluded) = (d.below(4), d.below(6), d.below(6));
        let mut pinned = d.peers(&peers, n_pinned);
        let mut included = d.peers(&peers, n_included);
        included.retain(|p| !pinned.contains(p));
        let excluded: Vec<i64> = d
            .peers(&peers, n_excluded)
            .into_iter()
            .filter(|p| !included.contains(p))
            .collect();
        pinned.push(999);
        let users = |ids: &[i64]| ids.iter().map(|p| Peer::user(*p)).collect::<Vec<_>>();
        let categories = d.below(4);
        let f = DialogFilter {
            id: 2,
            title: "drawn".into(),
            contacts: categories & 1 != 0 || (categories == 0 && included.is_empty()),
            non_contacts: categories & 2 != 0,
            exclude_muted: d.below(2) == 0,
            exclude_read: d.below(2) == 0,
            exclude_archived: d.below(2) == 0,
            pinned_peers: users(&pinned),
            include_peers: users(&included),
            exclude_peers: users(&excluded),
            ..Default::default()
        };
        let (seen, count) = filter_pages(&mut db, &f, &contacts, 7).await?;
        assert_eq!(count as usize, seen.len(), "case {case}: {f:?}");
    }
    Ok(())
}

/// The service over the test's schema, as GetDialogs answers (nothing here calls svc-updates).
fn service(db: &Db) -> anyhow::Result<svc_dialogs::DialogsService> {
    use std::{sync::Arc, time::Duration};
    let to_updates = svc_dialogs::outbound::ToUpdates::new(oxigram_kit::channel(
        "http://127.0.0.1:9",
        Duration::from_secs(1),
    )?);
    let derived = oxigram_outbox::FastPath::start(
        db.outbox.clone(),
        Arc::new(to_updates.clone()),
        Duration::ZERO,
    );
    Ok(svc_dialogs::DialogsService::new(
        db.schema.pool.clone(),
        db.outbox.clone(),
        to_updates,
        derived,
    ))
}

/// A list's first page and its count come from one snapshot, for a folder and for a filter:
/// a dialog committed while the page is read is either listed and counted or neither. Made
/// deterministic by holding dialog_counts (which every count reads, and no page) locked, and
/// committing a new dialog, in the transaction holding the lock, once the count waits for it:
/// a count read apart from its page would then count a dialog the page does not list.
#[tokio::test]
async fn a_first_page_and_its_count_are_one_snapshot() -> anyhow::Result<()> {
    use oxigram_proto::dialogs::v1::{GetDialogsRequest, dialogs_server::Dialogs};
    use std::time::{Duration, Instant};
    let mut db = schema().await?;
    five_dialogs(&mut db).await?;
    save_filter(
        &mut db,
        DialogFilter {
            id: 2,
            title: "all".into(),
            contacts: true,
            non_contacts: true,
            ..Default::default()
        },
    )
    .await?;
    let service = service(&db)?;
    let pool = &db.schema.pool;
    for (list, folder_id, filter_id, newcomer) in [("main list", 0, 0, 50), ("filter", 0, 2, 51)] {
        let mut holder = pool.begin().await?;
        sqlx::query("LOCK TABLE dialog_counts IN ACCESS EXCLUSIVE MODE")
            .execute(&mut *holder)
            .await?;
        let request = GetDialogsRequest {
            owner_id: OWNER,
            request: Some(oxigram_proto::types::v1::GetDialogsRequest {
                limit: 100,
                folder_id,
                filter_id,
                ..Default::default()
            }),
        };
        let arrive = async {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let waiting: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE datname = current_database() AND wait_event_type = 'Lock'",
                )
                .fetch_one(pool)
                .await?;
                if waiting > 0 {
                    break;
                }
                anyhow::ensure!(Instant::now() < deadline, "{list}: the count never waited");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // The newest dialog of all: a page read after it would list it first.
            sqlx::query(
                "INSERT INTO dialogs (owner_id, peer_user_id, top_message_id, top_message_date) \
                 VALUES ($1, $2, 1000, 100000)",
            )
            .bind(OWNER)
            .bind(newcomer)
            .execute(&mut *holder)
            .await?;
            holder.commit().await?;
            Ok(())
        };
        let (page, arrived) =
            tokio::join!(service.get_dialogs(tonic::Request::new(request)), arrive);
        arrived?;
        let page = page
            .map_err(|s| anyhow::anyhow!("{list}: {s}"))?
            .into_inner();
        // Listed and counted, or neither: the count is what the page lists (all of the list).
        let peers: Vec<i64> = page.dialogs.iter().map(Dialog::peer_user).collect();
        assert_eq!(page.count as usize, peers.len(), "{list}: {peers:?}");
    }
    Ok(())
}
