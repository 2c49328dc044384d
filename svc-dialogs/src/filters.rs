//! Dialog filters (custom folders): the rules a filter keeps, where filters are stored, and
//! the page of dialogs a filter holds: its pinned peers first, in their order, then the other
//! dialogs it takes, newest first, by the same seek key as a folder's.

use std::{collections::HashMap, sync::LazyLock};

use oxigram_errors::{ErrorCode, check_text, status};
use oxigram_proto::types::v1::{Dialog, DialogFilter, Peer};
use prost::Message as _;
use sqlx::PgPool;
use tonic::Status;

use crate::store::{self, CountedRow, DialogRow};

/// Most dialog filters a user has.
pub const MAX_DIALOG_FILTERS: usize = 30;
/// The ids a filter may take (0 and 1 are the main list and the archive).
pub const FILTER_IDS: std::ops::RangeInclusive<i32> = 2..=255;
/// Longest title and emoticon, in characters.
pub const MAX_TITLE_CHARS: usize = 12;
pub const MAX_EMOTICON_CHARS: usize = 8;
/// Most pinned and included peers together, and most excluded peers, of one filter.
pub const MAX_INCLUDED_PEERS: usize = 100;
pub const MAX_EXCLUDED_PEERS: usize = 100;

/// `FILTER_ID_INVALID` for an id no filter may take.
pub fn check_id(id: i32) -> Result<(), Status> {
    if !FILTER_IDS.contains(&id) {
        return Err(status(
            ErrorCode::FilterIdInvalid,
            "a filter id is from 2 to 255",
        ));
    }
    Ok(())
}

/// Distinct user ids of `peers`, in their order; `PEER_ID_INVALID` for one that names none.
fn users(peers: &[Peer]) -> Result<Vec<i64>, Status> {
    let mut ids = Vec::with_capacity(peers.len());
    for p in peers {
        let id = p
            .user_id()
            .filter(|id| *id > 0)
            .ok_or_else(|| status(ErrorCode::PeerIdInvalid, "a filter's peer names no user"))?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// The filter `id` as it is stored: the request's, checked, its title trimmed, each peer once
/// (a pinned peer is not also included; an included one is not excluded).
pub fn checked(id: i32, filter: DialogFilter) -> Result<DialogFilter, Status> {
    check_id(id)?;
    check_text("title", &filter.title)?;
    check_text("emoticon", &filter.emoticon)?;
    let title = filter.title.trim().to_owned();
    if title.is_empty() {
        return Err(status(ErrorCode::FilterTitleEmpty, "a filter has a title"));
    }
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(status(
            ErrorCode::FilterTitleInvalid,
            &format!("a title has at most {MAX_TITLE_CHARS} characters"),
        ));
    }
    if filter.emoticon.chars().count() > MAX_EMOTICON_CHARS {
        return Err(status(
            ErrorCode::FilterTitleInvalid,
            &format!("an emoticon has at most {MAX_EMOTICON_CHARS} characters"),
        ));
    }
    let pinned = users(&filter.pinned_peers)?;
    let included: Vec<i64> = users(&filter.include_peers)?
        .into_iter()
        .filter(|p| !pinned.contains(p))
        .collect();
    let excluded: Vec<i64> = users(&filter.exclude_peers)?
        .into_iter()
        .filter(|p| !pinned.contains(p) && !included.contains(p))
        .collect();
    if pinned.len() + included.len() > MAX_INCLUDED_PEERS {
        return Err(status(
            ErrorCode::FilterIncludeTooMuch,
            &format!("at most {MAX_INCLUDED_PEERS} pinned and included peers"),
        ));
    }
    if excluded.len() > MAX_EXCLUDED_PEERS {
        return Err(status(
            ErrorCode::FilterExcludeTooMuch,
            &format!("at most {MAX_EXCLUDED_PEERS} excluded peers"),
        ));
    }
    if !filter.contacts && !filter.non_contacts && pinned.is_empty() && included.is_empty() {
        return Err(status(
            ErrorCode::FilterIncludeEmpty,
            "a filter includes a category or a peer",
        ));
    }
    let peers = |ids: Vec<i64>| ids.into_iter().map(Peer::user).collect();
    Ok(DialogFilter {
        id,
        title,
        pinned_peers: peers(pinned),
        include_peers: peers(included),
        exclude_peers: peers(excluded),
        ..filter
    })
}

/// `owner`'s dialog filters, in her order (primary key of dialog_filters, its owner prefix).
pub async fn filters(pool: &PgPool, owner: i64) -> Result<Vec<DialogFilter>, sqlx::Error> {
    let rows: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT filter FROM dialog_filters WHERE owner_id = $1 ORDER BY position",
    )
    .bind(owner)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|bytes| {
            DialogFilter::decode(bytes.as_slice()).map_err(|e| sqlx::Error::Decode(Box::new(e)))
        })
        .collect()
}

/// `owner`'s dialog filter `id`, if she has it (primary key of dialog_filters).
pub async fn filter(
    pool: &PgPool,
    owner: i64,
    id: i32,
) -> Result<Option<DialogFilter>, sqlx::Error> {
    let row: Option<Vec<u8>> = sqlx::query_scalar(
        "SELECT filter FROM dialog_filters WHERE owner_id = $1 AND filter_id = $2",
    )
    .bind(owner)
    .bind(id)
    .fetch_optional(pool)
    .await?;
    row.map(|bytes| {
        DialogFilter::decode(bytes.as_slice()).map_err(|e| sqlx::Error::Decode(Box::new(e)))
    })
    .transpose()
}

/// A dialog's place in the newest-first order: (top message date, top message id, peer).
fn key(d: &Dialog) -> (i64, i64, i64) {
    (d.top_message_date, d.top_message_id, d.peer_user())
}

/// Where a filter's page starts.
#[derive(Debug, Clone, Copy)]
pub enum Offset {
    First,
    /// After this pinned peer.
    AfterPinned(i64),
    /// After this (top message date, id, peer) among the rest.
    After(i64, i64, i64),
}

/// What a filter's rules take of a dialog (sql/filter_rules.sql, sql/filter_exclusions.sql).
macro_rules! rules {
    () => {
        concat!(
            include_str!("../sql/filter_rules.sql"),
            include_str!("../sql/filter_exclusions.sql"),
            ")"
        )
    };
}

/// A filter's count besides its pinned peers, when $15 asks for it (sql/filter_count.sql with
/// its parts in place).
static COUNT: LazyLock<String> = LazyLock::new(|| {
    let peers = concat!(
        include_str!("../sql/filter_count_peers.sql"),
        rules!(),
        include_str!("../sql/filter_count_peers_tail.sql"),
    );
    include_str!("../sql/filter_count.sql")
        .replace(
            "CATEGORY_COUNT",
            include_str!("../sql/filter_count_all.sql"),
        )
        .replace("PEERS_COUNT", peers)
});

/// One page of what a filter's rules take besides its pinned peers, each row with the
/// filter's count when $15 asks for it.
static PAGE: LazyLock<String> = LazyLock::new(|| {
    [
        include_str!("../sql/filter_page_head.sql"),
        &COUNT,
        include_str!("../sql/filter_page_from.sql"),
        include_str!("../sql/filter_match.sql"),
        rules!(),
        include_str!("../sql/filter_page_tail.sql"),
    ]
    .concat()
});

/// The statement of a filter's page (and, with $15, its count): for plans (the benchmark).
pub fn page_sql() -> &'static str {
    PAGE.as_str()
}

/// The count alone, for a first page its pinned peers fill.
static COUNT_ALONE: LazyLock<String> = LazyLock::new(|| format!("SELECT {} AS total", *COUNT));

/// One page of the dialogs `filter` holds, and, on the first page, how many it holds in all
/// (0 on later pages: counting them all is most of a page's cost, and the first page told it).
///
/// Two statements at most, each one snapshot that agrees with itself: the pinned peers'
/// dialogs (by primary key; only on the pages that show them), and the rest of the page with
/// the count of the rest. The pinned part is counted as what it lists; the rest's count
/// leaves the pinned peers out as its rows do. So a dialog arriving meanwhile is either listed
/// and counted or neither.
pub async fn page(
    pool: &PgPool,
    owner: i64,
    filter: &DialogFilter,
    offset: Offset,
    limit: i32,
) -> Result<(Vec<Dialog>, i32), sqlx::Error> {
    let ids = |peers: &[Peer]| -> Vec<i64> { peers.iter().filter_map(Peer::user_id).collect() };
    let pinned = ids(&filter.pinned_peers);
    let excluded = ids(&filter.exclude_peers);
    let included = ids(&filter.include_peers);
    let first = matches!(offset, Offset::First);
    let by_categories = filter.contacts || filter.non_contacts;
    // The pinned peers' dialogs unless the page is past them; without categories, the
    // included peers' too (they are all a filter of peers alone lists), in the same statement.
    let mut wanted: Vec<i64> = match offset {
        Offset::After(..) => Vec::new(),
        Offset::First | Offset::AfterPinned(_) => pinned.clone(),
    };
    if !by_categories {
        wanted.extend(included.iter().copied());
    }
    let mut rows: HashMap<i64, DialogRow> = if wanted.is_empty() {
        HashMap::new()
    } else {
        store::dialog_rows(pool, owner, &wanted)
            .await?
            .into_iter()
            .filter(|r| r.listed() && !excluded.contains(&r.peer()))
            .map(|r| (r.peer(), r))
            .collect()
    };
    let pinned_listed: Vec<i64> = match offset {
        Offset::After(..) => Vec::new(),
        Offset::First | Offset::AfterPinned(_) => pinned
            .iter()
            .copied()
            .filter(|p| rows.contains_key(p))
            .collect(),
    };
    let (skip, after) = match offset {
        Offset::First => (0, None),
        Offset::AfterPinned(peer) => (
            pinned_listed
                .iter()
                .position(|p| *p == peer)
                .map_or(pinned_listed.len(), |i| i + 1),
            None,
        ),
        Offset::After(date, id, peer) => (0, Some((date, id, peer))),
    };
    let mut dialogs: Vec<Dialog> = pinned_listed
        .iter()
        .skip(skip)
        .take(limit as usize)
        .filter_map(|p| rows.remove(p))
        .map(|r| Dialog {
            pinned: true,
            ..Dialog::from(r)
        })
        .collect();
    let after = after.unwrap_or((i64::MAX, i64::MAX, i64::MAX));
    if !by_categories {
        // Only the included peers, read with the pinned ones: no scan of every dialog.
        let mut rest: Vec<Dialog> = included
            .iter()
            .filter(|p| !pinned.contains(p))
            .filter_map(|p| rows.remove(p))
            .map(|r| Dialog {
                pinned: false,
                ..Dialog::from(r)
            })
            .collect();
        rest.sort_by_key(|d| std::cmp::Reverse(key(d)));
        let count = pinned_listed.len() + rest.len();
        let room = (limit as usize).saturating_sub(dialogs.len());
        dialogs.extend(rest.into_iter().filter(|d| key(d) < after).take(room));
        return Ok((dialogs, if first { count as i32 } else { 0 }));
    }
    let rules = Rules {
        owner,
        pinned: &pinned,
        excluded: &excluded,
        included: &included,
        filter,
        now: chrono::Utc::now().timestamp(),
        counted: first,
    };
    let rest_limit = limit as i64 - dialogs.len() as i64;
    let rest_count = if rest_limit > 0 {
        let rest: Vec<CountedRow> = rules
            .bind(sqlx::query_as(PAGE.as_str()), after, rest_limit)
            .fetch_all(pool)
            .await?;
        // Every row carries the count; a first page with no row has nothing to count (the
        // statement's snapshot holds no dialog its rules take besides the pinned ones).
        let count = rest.first().map_or(0, |r| r.total);
        dialogs.extend(rest.into_iter().map(|r| Dialog {
            // Pinned in its folder, not in this filter.
            pinned: false,
            ..Dialog::from(r.row)
        }));
        count
    } else if first {
        let (count,): (i32,) = rules
            .bind(sqlx::query_as(COUNT_ALONE.as_str()), after, 0)
            .fetch_one(pool)
            .await?;
        count
    } else {
        0
    };
    Ok((
        dialogs,
        if first {
            pinned_listed.len() as i32 + rest_count
        } else {
            0
        },
    ))
}

/// What a filter's statements take, bound in the one order they share: $1 the owner, $2..$4
/// the seek key, $5 the limit, $6..$8 the peers, $9..$14 the rules, $15 whether to count.
struct Rules<'a> {
    owner: i64,
    pinned: &'a [i64],
    excluded: &'a [i64],
    included: &'a [i64],
    filter: &'a DialogFilter,
    now: i64,
    counted: bool,
}

impl Rules<'_> {
    fn bind<'q, O>(
        &'q self,
        query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
        after: (i64, i64, i64),
        limit: i64,
    ) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
        query
            .bind(self.owner)
            .bind(after.0)
            .bind(after.1)
            .bind(after.2)
            .bind(limit)
            .bind(self.pinned)
            .bind(self.excluded)
            .bind(self.included)
            .bind(self.filter.contacts)
            .bind(self.filter.non_contacts)
            .bind(self.filter.exclude_muted)
            .bind(self.filter.exclude_read)
            .bind(self.filter.exclude_archived)
            .bind(self.now)
            .bind(self.counted)
    }
}
