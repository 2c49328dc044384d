//! The SQL of dialogs' pages, reads' views, receipts (DELIVERED) and watermarks. Statements of
//! more than a line are in `sql/`.

use oxigram_outbox::Outbox;
use oxigram_proto::types::v1::{
    Dialog, DraftMessage, Peer, PeerNotifySettings, Update, UpdateDeliveredOutbox, UserEvent,
    update,
};
use prost::Message as _;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::outbound;

/// Most peers one receipt reports to; older gaps are left to later receipts.
pub const MAX_RECEIPT_PEERS: i64 = 1000;

/// A row of dialogs as a page shows it.
#[derive(sqlx::FromRow)]
pub(crate) struct DialogRow {
    peer_user_id: i64,
    top_message_id: i64,
    top_message_date: i64,
    read_inbox_max_id: i64,
    read_outbox_max_id: i64,
    unread_count: i32,
    delivered_outbox_max_id: i64,
    folder_id: i32,
    pinned_rank: i32,
    unread_mark: bool,
    mute_until: i64,
    show_previews: Option<bool>,
    silent: Option<bool>,
    draft: Option<Vec<u8>>,
    settings_bar_hidden: bool,
    unread_reactions_count: i32,
}

impl DialogRow {
    /// Listed by GetDialogs: it has a message, or had one and was cleared with just_clear.
    pub(crate) fn listed(&self) -> bool {
        self.top_message_id > 0 || self.top_message_date > 0
    }

    pub(crate) fn peer(&self) -> i64 {
        self.peer_user_id
    }

    pub(crate) fn unread_marked(&self) -> bool {
        self.unread_mark
    }

    pub(crate) fn folder(&self) -> i32 {
        self.folder_id
    }
}

impl From<DialogRow> for Dialog {
    fn from(r: DialogRow) -> Self {
        let settings = PeerNotifySettings {
            show_previews: r.show_previews,
            silent: r.silent,
            mute_until: r.mute_until,
        };
        Dialog {
            peer: Some(Peer::user(r.peer_user_id)),
            top_message_id: r.top_message_id,
            top_message_date: r.top_message_date,
            read_inbox_max_id: r.read_inbox_max_id,
            read_outbox_max_id: r.read_outbox_max_id,
            unread_count: r.unread_count,
            delivered_outbox_max_id: r.delivered_outbox_max_id,
            pinned: r.pinned_rank > 0,
            folder_id: r.folder_id,
            unread_mark: r.unread_mark,
            notify_settings: (settings != PeerNotifySettings::default()).then_some(settings),
            // A draft is written here only from a DraftMessage this service encoded.
            draft: r
                .draft
                .and_then(|bytes| DraftMessage::decode(bytes.as_slice()).ok()),
            settings_bar_hidden: r.settings_bar_hidden,
            // Below 0 only while a removal is applied ahead of its reaction.
            unread_reactions_count: r.unread_reactions_count.max(0),
        }
    }
}

/// The seek key of a folder's page: (pinned rank, top message date, top message id, peer) of
/// the last dialog of the previous page; unpinned dialogs have rank 0.
pub type FolderKey = (i32, i64, i64, i64);

/// The key before every dialog.
pub const FIRST_KEY: FolderKey = (i32::MAX, i64::MAX, i64::MAX, i64::MAX);

/// A row of dialogs as a page shows it, with the count of its list (0 when not asked for).
#[derive(sqlx::FromRow)]
pub(crate) struct CountedRow {
    #[sqlx(flatten)]
    pub(crate) row: DialogRow,
    pub(crate) total: i32,
}

/// A folder's page, each row with the folder's count when $9 asks for it (sql/page.sql,
/// sql/folder_count.sql, sql/page_tail.sql).
pub const PAGE_SQL: &str = concat!(
    include_str!("../sql/page.sql"),
    include_str!("../sql/folder_count.sql"),
    include_str!("../sql/page_tail.sql"),
);

/// A page of a folder's dialogs after the seek key and, when `counted`, the folder's count,
/// in one statement (index dialogs_folder_order; the count from dialog_counts' primary key).
async fn folder_rows(
    db: impl sqlx::PgExecutor<'_>,
    owner: i64,
    folder: i32,
    after: FolderKey,
    limit: i32,
    include_empty: bool,
    counted: bool,
) -> Result<(Vec<Dialog>, i32), sqlx::Error> {
    let rows: Vec<CountedRow> = sqlx::query_as(PAGE_SQL)
        .bind(owner)
        .bind(folder)
        .bind(after.0)
        .bind(after.1)
        .bind(after.2)
        .bind(after.3)
        .bind(limit as i64)
        .bind(include_empty)
        .bind(counted)
        .fetch_all(db)
        .await?;
    // Every row carries the count; a first page without a row lists nothing, so counts none.
    let count = rows.first().map_or(0, |r| r.total);
    Ok((
        rows.into_iter().map(|r| Dialog::from(r.row)).collect(),
        count,
    ))
}

/// One page of a folder's dialogs after the seek key: pinned first in their order, then
/// newest first (index dialogs_folder_order); with `include_empty` also those without a
/// message.
pub async fn page(
    db: impl sqlx::PgExecutor<'_>,
    owner: i64,
    folder: i32,
    after: FolderKey,
    limit: i32,
    include_empty: bool,
) -> Result<Vec<Dialog>, sqlx::Error> {
    Ok(
        folder_rows(db, owner, folder, after, limit, include_empty, false)
            .await?
            .0,
    )
}

/// A folder's first page and how many dialogs the folder lists, in one statement, so one
/// snapshot: a dialog arriving meanwhile is either listed and counted or neither.
pub async fn first_page(
    db: impl sqlx::PgExecutor<'_>,
    owner: i64,
    folder: i32,
    limit: i32,
    include_empty: bool,
) -> Result<(Vec<Dialog>, i32), sqlx::Error> {
    folder_rows(db, owner, folder, FIRST_KEY, limit, include_empty, true).await
}

/// How many dialogs a folder lists (primary key of dialog_counts, its (owner, folder) prefix).
pub async fn folder_count(
    db: impl sqlx::PgExecutor<'_>,
    owner: i64,
    folder: i32,
) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/folder_count.sql"))
        .bind(owner)
        .bind(folder)
        .fetch_one(db)
        .await
}

/// `owner`'s dialogs with `peers` (listed or not), in no order (primary key of dialogs).
pub(crate) async fn dialog_rows(
    db: impl sqlx::PgExecutor<'_>,
    owner: i64,
    peers: &[i64],
) -> Result<Vec<DialogRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/peer_dialogs.sql"))
        .bind(owner)
        .bind(peers)
        .fetch_all(db)
        .await
}

/// `owner`'s listed dialogs with `peers`, in the order of `peers`, each once.
pub async fn peer_dialogs(
    pool: &PgPool,
    owner: i64,
    peers: &[i64],
) -> Result<Vec<Dialog>, sqlx::Error> {
    let mut rows: std::collections::HashMap<i64, DialogRow> = dialog_rows(pool, owner, peers)
        .await?
        .into_iter()
        .filter(DialogRow::listed)
        .map(|r| (r.peer_user_id, r))
        .collect();
    Ok(peers
        .iter()
        .filter_map(|p| rows.remove(p))
        .map(Dialog::from)
        .collect())
}

/// A dialog's folder and whether it is listed, when the owner has it (primary key of dialogs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DialogPlace {
    pub folder_id: i32,
    pub pinned: bool,
    pub listed: bool,
}

pub async fn place(
    pool: &PgPool,
    owner: i64,
    peer: i64,
) -> Result<Option<DialogPlace>, sqlx::Error> {
    let row: Option<(i32, i32, bool)> = sqlx::query_as(
        "SELECT folder_id, pinned_rank, (top_message_id > 0 OR top_message_date > 0) \
         FROM dialogs WHERE owner_id = $1 AND peer_user_id = $2",
    )
    .bind(owner)
    .bind(peer)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(folder_id, rank, listed)| DialogPlace {
        folder_id,
        pinned: rank > 0,
        listed,
    }))
}

/// A folder's pinned dialogs' peers, in their order (index dialogs_folder_order).
pub async fn pinned(pool: &PgPool, owner: i64, folder: i32) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT peer_user_id FROM dialogs WHERE owner_id = $1 AND folder_id = $2 \
         AND pinned_rank > 0 ORDER BY pinned_rank DESC",
    )
    .bind(owner)
    .bind(folder)
    .fetch_all(pool)
    .await
}

/// The pinned rank of `peer`'s dialog in `folder`, 0 when it is not pinned there (primary
/// key of dialogs).
pub async fn pinned_rank(
    pool: &PgPool,
    owner: i64,
    folder: i32,
    peer: i64,
) -> Result<i32, sqlx::Error> {
    let rank: Option<i32> = sqlx::query_scalar(
        "SELECT pinned_rank FROM dialogs WHERE owner_id = $1 AND peer_user_id = $2 \
         AND folder_id = $3",
    )
    .bind(owner)
    .bind(peer)
    .bind(folder)
    .fetch_optional(pool)
    .await?;
    Ok(rank.unwrap_or(0))
}

/// The dialog's notification settings; the defaults when it has none (primary key of
/// dialogs).
pub async fn notify_settings(
    pool: &PgPool,
    owner: i64,
    peer: i64,
) -> Result<PeerNotifySettings, sqlx::Error> {
    let row: Option<(i64, Option<bool>, Option<bool>)> = sqlx::query_as(
        "SELECT mute_until, show_previews, silent FROM dialogs \
         WHERE owner_id = $1 AND peer_user_id = $2",
    )
    .bind(owner)
    .bind(peer)
    .fetch_optional(pool)
    .await?;
    Ok(row.map_or_else(
        PeerNotifySettings::default,
        |(mute_until, show_previews, silent)| PeerNotifySettings {
            show_previews,
            silent,
            mute_until,
        },
    ))
}

/// What the peer settings bar rests on: whether the dialog has a message from the peer, one
/// from the owner, and whether she hid the bar (primary key of dialogs; dialog_incoming's).
pub async fn settings_bar(
    pool: &PgPool,
    owner: i64,
    peer: i64,
) -> Result<Option<(bool, bool, bool)>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/settings_bar.sql"))
        .bind(owner)
        .bind(peer)
        .fetch_optional(pool)
        .await
}

/// A dialog as a read counts it, in one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ReadView {
    /// How far the reader's log has been applied here.
    pub position: i32,
    pub read_inbox_max_id: i64,
    /// The message the read goes up to, as far as this view knows.
    pub target: i64,
    pub still_unread: i64,
}

/// `owner`'s position, her watermark in the dialog with `peer`, the message a read up to
/// `max_id` (0: everything) goes up to and the messages above it.
pub async fn read_view(
    pool: &PgPool,
    owner: i64,
    peer: i64,
    max_id: i64,
) -> Result<ReadView, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/read_view.sql"))
        .bind(owner)
        .bind(peer)
        .bind(max_id)
        .fetch_one(pool)
        .await
}

/// How far `owner`'s log has been applied here; 0 before any of it (primary key of
/// log_positions).
pub async fn log_position(pool: &PgPool, owner: i64) -> Result<i32, sqlx::Error> {
    let position: Option<i32> =
        sqlx::query_scalar("SELECT pts FROM log_positions WHERE owner_id = $1")
            .bind(owner)
            .fetch_optional(pool)
            .await?;
    Ok(position.unwrap_or(0))
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
pub(crate) async fn enqueue(
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
#[derive(Debug, Clone, Copy)]
pub enum Watermark {
    ReadOutbox,
    DeliveredOutbox,
}

/// Moves `owner`'s watermark in the dialog with `peer` up to `max_id`; `true` when it moved
/// (primary key of dialogs). The dialog row is created when the owner's own new-message
/// events have not been applied yet, so a read or receipt that overtakes them is kept.
pub async fn advance(
    tx: &mut PgConnection,
    watermark: Watermark,
    owner: i64,
    peer: i64,
    max_id: i64,
) -> Result<bool, sqlx::Error> {
    let sql = match watermark {
        Watermark::ReadOutbox => include_str!("../sql/advance_read_outbox.sql"),
        Watermark::DeliveredOutbox => include_str!("../sql/advance_delivered_outbox.sql"),
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
    sqlx::query_scalar(include_str!("../sql/outbox_read_date.sql"))
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
    let before: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT auth_key_id, max_id FROM device_receipts WHERE owner_id = $1 FOR UPDATE",
    )
    .bind(owner)
    .fetch_all(&mut *tx)
    .await?;
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
    sqlx::query(include_str!("../sql/store_device_receipt.sql"))
        .bind(owner)
        .bind(auth_key_id)
        .bind(target)
        .execute(&mut *tx)
        .await?;
    let mut events = Vec::new();
    if target > user_before {
        let peers: Vec<(i64, i64)> = sqlx::query_as(include_str!("../sql/receipt_peers.sql"))
            .bind(owner)
            .bind(user_before)
            .bind(target)
            .bind(MAX_RECEIPT_PEERS)
            .fetch_all(&mut *tx)
            .await?;
        for (peer, peer_max) in peers {
            let moved = advance(&mut tx, Watermark::DeliveredOutbox, peer, owner, peer_max).await?;
            if moved {
                events.push(event(
                    peer,
                    update::Kind::DeliveredOutbox(UpdateDeliveredOutbox {
                        peer: Some(Peer::user(owner)),
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
