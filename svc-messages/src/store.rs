//! The owner-view reads of messages (history, messages by id, search) and the block list.

use std::sync::LazyLock;

use oxigram_proto::types::v1::Message;
use sqlx::PgPool;

use crate::{rows::MessageRow, search_words::QueryWords};

/// The messages of `box_query`, a query of message_boxes rows (sql/messages_of_boxes.sql).
pub(crate) fn messages_of(box_query: &str) -> String {
    include_str!("../sql/messages_of_boxes.sql").replace("{box_query}", box_query)
}

/// Blocks (`true`) or unblocks a user; idempotent.
pub async fn set_blocked(
    pool: &PgPool,
    owner: i64,
    user: i64,
    blocked: bool,
) -> Result<(), sqlx::Error> {
    let sql = if blocked {
        "INSERT INTO blocks (owner_id, blocked_user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING"
    } else {
        "DELETE FROM blocks WHERE owner_id = $1 AND blocked_user_id = $2"
    };
    sqlx::query(sql)
        .bind(owner)
        .bind(user)
        .execute(pool)
        .await?;
    Ok(())
}

/// Which of `owners` blocked `user_id` (primary key of blocks, one probe per owner).
pub async fn blocked_by(
    pool: &PgPool,
    user_id: i64,
    owners: &[i64],
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT owner_id FROM blocks WHERE owner_id = ANY($1) AND blocked_user_id = $2",
    )
    .bind(owners)
    .bind(user_id)
    .fetch_all(pool)
    .await
}

/// Which of `users` `owner` blocked (primary key of blocks, one probe per user).
pub async fn blocked_among(
    pool: &PgPool,
    owner: i64,
    users: &[i64],
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT blocked_user_id FROM blocks WHERE owner_id = $1 AND blocked_user_id = ANY($2)",
    )
    .bind(owner)
    .bind(users)
    .fetch_all(pool)
    .await
}

/// Blocked users after `after`, ascending (primary key of blocks).
pub async fn blocked(
    pool: &PgPool,
    owner: i64,
    after: i64,
    limit: i32,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/blocked.sql"))
        .bind(owner)
        .bind(after)
        .bind(limit as i64)
        .fetch_all(pool)
        .await
}

/// A history window, checked and clamped at the boundary.
pub struct HistoryWindow {
    pub owner: i64,
    pub peer: i64,
    /// The anchor: messages with ids below it are "older" (0 = no id anchor).
    pub offset_id: i64,
    /// With no id anchor: messages sent before this date are "older" (0 = from the newest).
    pub offset_date: i64,
    /// The window's start relative to the anchor, in [-100, 100]: negative reaches newer messages.
    pub add_offset: i32,
    /// In 1..=100.
    pub limit: i32,
    /// Keep ids strictly below (0 = no bound).
    pub max_id: i64,
    /// Keep ids strictly above (0 = no bound).
    pub min_id: i64,
}

/// The MTProto history window, newest first. Both parts seek on index message_boxes_history
/// (no SQL OFFSET): the messages at or after the anchor ascending from it, those before it
/// descending; `add_offset` only moves the window within at most 100 rows of the anchor.
pub async fn history(pool: &PgPool, w: &HistoryWindow) -> Result<Vec<Message>, sqlx::Error> {
    // (id, date) bounds of "older than the anchor"; i64::MAX = unbounded.
    let (anchor_id, anchor_date) = match (w.offset_id, w.offset_date) {
        (0, 0) => (i64::MAX, i64::MAX),
        (0, date) => (i64::MAX, date),
        (id, _) => (id, i64::MAX),
    };
    let has_anchor = anchor_id != i64::MAX || anchor_date != i64::MAX;
    let upper = if w.max_id > 0 { w.max_id } else { i64::MAX };
    let lower = w.min_id.max(0);
    let (s, limit) = (w.add_offset as i64, w.limit as i64);

    // At or after the anchor: the k-th closest (k from 0) is in the window when
    // -(s + limit) <= k < -s.
    let mut window = Vec::new();
    if s < 0 && has_anchor {
        static AT_OR_AFTER: LazyLock<String> =
            LazyLock::new(|| messages_of(include_str!("../sql/history_newer.sql")));
        let mut rows: Vec<MessageRow> = sqlx::query_as(AT_OR_AFTER.as_str())
            .bind(w.owner)
            .bind(w.peer)
            .bind(if anchor_id == i64::MAX { 0 } else { anchor_id })
            .bind(if anchor_date == i64::MAX {
                0
            } else {
                anchor_date
            })
            .bind(upper)
            .bind(lower)
            .bind(-s)
            .fetch_all(pool)
            .await?;
        rows.sort_unstable_by_key(|r| r.box_id);
        let skip = (-(s + limit)).max(0) as usize;
        window.extend(rows.into_iter().skip(skip).rev().map(Message::from));
    }
    // Before the anchor: the j-th (from 0) is in the window when max(0, s) <= j < s + limit.
    let older_end = s + limit;
    if older_end > 0 {
        static BEFORE: LazyLock<String> =
            LazyLock::new(|| messages_of(include_str!("../sql/history_older.sql")));
        let mut rows: Vec<MessageRow> = sqlx::query_as(BEFORE.as_str())
            .bind(w.owner)
            .bind(w.peer)
            .bind(anchor_id)
            .bind(anchor_date)
            .bind(upper)
            .bind(lower)
            .bind(older_end)
            .fetch_all(pool)
            .await?;
        rows.sort_unstable_by_key(|r| std::cmp::Reverse(r.box_id));
        window.extend(rows.into_iter().skip(s.max(0) as usize).map(Message::from));
    }
    Ok(window)
}

/// The owner's messages with these ids, in their current state, ascending: one probe of the
/// primary key of message_boxes per distinct id, then one of message_bodies.
pub async fn by_ids(pool: &PgPool, owner: i64, ids: &[i64]) -> Result<Vec<Message>, sqlx::Error> {
    static BY_IDS: LazyLock<String> =
        LazyLock::new(|| messages_of(include_str!("../sql/boxes_by_ids.sql")));
    let mut rows: Vec<MessageRow> = sqlx::query_as(BY_IDS.as_str())
        .bind(owner)
        .bind(ids)
        .fetch_all(pool)
        .await?;
    rows.sort_unstable_by_key(|r| r.box_id);
    Ok(rows.into_iter().map(Message::from).collect())
}

/// A search of one owner's messages, checked at the boundary.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    pub owner: i64,
    /// The dialog searched (0 = every dialog).
    pub peer: i64,
    /// What the messages' text must match.
    pub words: QueryWords,
    /// Inclusive date bounds, Unix seconds.
    pub min_date: i64,
    pub max_date: i64,
    /// Only messages of this sender (0 = anyone).
    pub from: i64,
    /// Seek key: box ids below it.
    pub below_id: i64,
    /// In 1..=100.
    pub limit: i32,
}

impl SearchQuery {
    /// Whether a message of this date, sender and text is one the search asks for.
    fn wants(&self, date: i64, sender: i64, text: &str) -> bool {
        (self.min_date..=self.max_date).contains(&date)
            && (self.from == 0 || sender == self.from)
            && self.words.matches(text)
    }
}

/// A box of the owner still queued for the indexer, as a search tests it
/// (sql/search_queued.sql).
#[derive(sqlx::FromRow)]
struct QueuedBox {
    box_id: i64,
    date: i64,
    sender_id: i64,
    text: String,
}

/// One page of a search, newest first.
pub struct SearchPage {
    pub messages: Vec<Message>,
    /// Where the next page starts (box ids below it), 0 when the search has nothing more.
    pub next_offset_id: i64,
}

/// Candidates a search reads first for a page of `limit`, and at most in one round.
const FIRST_CANDIDATES: i64 = 32;
const MAX_CANDIDATES: i64 = 1024;
/// Candidates one page reads at most: a query whose filters (dates, sender, stale keys of an
/// edited text) turn down more answers a shorter page that says where to go on.
const PAGE_CANDIDATES: usize = 4096;

/// The owner's messages matching `q.words`, newest first. Boxes the indexer has taken are
/// found through message_words (sql/search_candidates.sql), read in rounds of growing size
/// until the page is full; boxes still queued are tested as they are (sql/search_queued.sql).
/// The queue is read first: a box leaves it in the transaction that indexes it, so that a box
/// the first read misses is in the index the second reads. Every candidate is tested against
/// the current text by the one rule of [`QueryWords::matches`], so a key an edit made stale
/// finds nothing.
pub async fn search(pool: &PgPool, q: &SearchQuery) -> Result<SearchPage, sqlx::Error> {
    let queued: Vec<QueuedBox> = sqlx::query_as(include_str!("../sql/search_queued.sql"))
        .bind(q.owner)
        .bind(q.peer)
        .bind(q.below_id)
        .fetch_all(pool)
        .await?;
    let mut queued: Vec<i64> = queued
        .into_iter()
        .filter(|b| q.wants(b.date, b.sender_id, &b.text))
        .map(|b| b.box_id)
        .collect();

    let limit = q.limit as usize;
    let lead_end = q.words.lead_end();
    let mut found: Vec<Message> = Vec::new();
    let mut seek = q.below_id;
    let mut want = FIRST_CANDIDATES.max(2 * q.limit as i64);
    let mut read = 0;
    // The index was read down to `seek`, all of it when `exhausted`.
    let exhausted = loop {
        let candidates: Vec<i64> = sqlx::query_scalar(include_str!("../sql/search_candidates.sql"))
            .bind(q.owner)
            .bind(q.peer)
            .bind(q.words.lead())
            .bind(&lead_end)
            .bind(seek)
            .bind(want)
            .fetch_all(pool)
            .await?;
        read += candidates.len();
        let last_round = (candidates.len() as i64) < want;
        if let Some(&lowest) = candidates.last() {
            seek = lowest;
        }
        found.extend(
            by_ids(pool, q.owner, &candidates)
                .await?
                .into_iter()
                .filter(|m| q.wants(m.date, m.from_user_id, &m.text)),
        );
        if last_round {
            break true;
        }
        let queued_above = queued.iter().filter(|&&id| id >= seek).count();
        if found.len() + queued_above >= limit || read >= PAGE_CANDIDATES {
            break false;
        }
        want = (want * 4).min(MAX_CANDIDATES);
    };

    // Below `seek` only queued boxes were read; they belong to a later page unless the index
    // has nothing more. Of the rest, only those that can make the page are fetched.
    if !exhausted {
        queued.retain(|&id| id >= seek);
    }
    let found_ids: std::collections::HashSet<i64> = found.iter().map(|m| m.id).collect();
    queued.retain(|id| !found_ids.contains(id));
    queued.sort_unstable_by(|a, b| b.cmp(a));
    queued.truncate(limit);
    if !queued.is_empty() {
        found.extend(by_ids(pool, q.owner, &queued).await?);
    }
    // Each id once: the index's rounds read below each other, and queued ids it found are
    // left out above.
    found.sort_unstable_by_key(|m| std::cmp::Reverse(m.id));
    let next_offset_id = match found.len() >= limit {
        true => {
            found.truncate(limit);
            found.last().map_or(0, |m| m.id)
        }
        false if !exhausted => seek,
        false => 0,
    };
    Ok(SearchPage {
        messages: found,
        next_offset_id,
    })
}

/// Whether a message of `owner`'s box (not deleted) carries the content with hash `sha256`
/// (message_bodies_media_sha256, then message_boxes_body).
pub async fn holds_content(pool: &PgPool, owner: i64, sha256: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/holds_content.sql"))
        .bind(owner)
        .bind(sha256)
        .fetch_one(pool)
        .await
}
