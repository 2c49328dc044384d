//! The owner-view reads of messages (history, messages by id) and the block list.

use std::sync::LazyLock;

use oxigram_proto::types::v1::Message;
use sqlx::{PgPool, Postgres, postgres::PgArguments, query::QueryAs};

use crate::rows::MessageRow;

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
pub struct SearchQuery {
    pub owner: i64,
    /// The dialog searched (0 = every dialog).
    pub peer: i64,
    /// The text to find, as the owner typed it (trimmed, 3 characters or more).
    pub text: String,
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

/// The `ILIKE` pattern matching `text` anywhere, its own wildcards taken literally.
pub fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// How many of the owner's newest boxes a search tests per message it may return, before it
/// looks the text up in the index instead.
pub const RECENT_BOXES_PER_RESULT: i64 = 100;

/// The owner's messages whose current text contains `q.text`, ignoring case, newest first,
/// in two steps of bounded cost. First the newest `RECENT_BOXES_PER_RESULT * limit` boxes are
/// tested (sql/search_recent.sql): a text in more than about one message in a hundred fills
/// the page there. Otherwise the text is rarer than that, and its bodies are looked up in
/// index message_bodies_search (sql/search_indexed.sql), which answers the whole page,
/// whatever the first step found. Each statement is planned for its own arguments (not a
/// cached generic plan), so that a dialog's search walks message_boxes_history.
pub async fn search(pool: &PgPool, q: &SearchQuery) -> Result<Vec<Message>, sqlx::Error> {
    let pattern = contains_pattern(&q.text);
    let limit = q.limit as i64;
    let recent = search_step(include_str!("../sql/search_recent.sql"), q, &pattern)
        .bind(limit * RECENT_BOXES_PER_RESULT)
        .fetch_all(pool)
        .await?;
    let rows = if recent.len() as i64 == limit {
        recent
    } else {
        search_step(include_str!("../sql/search_indexed.sql"), q, &pattern)
            .fetch_all(pool)
            .await?
    };
    Ok(rows.into_iter().map(Message::from).collect())
}

/// One step of [`search`], its parameters bound up to `$8` (the page's size); planned for
/// these arguments, not a cached generic plan.
fn search_step<'q>(
    sql: &'static str,
    q: &'q SearchQuery,
    pattern: &'q str,
) -> QueryAs<'q, Postgres, MessageRow, PgArguments> {
    sqlx::query_as(sql)
        .persistent(false)
        .bind(q.owner)
        .bind(q.peer)
        .bind(pattern)
        .bind(q.min_date)
        .bind(q.max_date)
        .bind(q.from)
        .bind(q.below_id)
        .bind(q.limit as i64)
}
