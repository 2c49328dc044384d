//! Dialog filters (custom folders): the rules a filter keeps, where filters are stored, and
//! the page of dialogs a filter holds: its pinned peers first, in their order, then the other
//! dialogs it takes, newest first, by the same seek key as a folder's.

use std::collections::HashMap;

use oxigram_errors::{ErrorCode, check_text, status};
use oxigram_proto::types::v1::{Dialog, DialogFilter, Peer};
use prost::Message as _;
use sqlx::PgPool;
use tonic::Status;

use crate::store::{self, DialogRow};

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

/// Whether the filter sorts dialogs by the owner's contacts (one category of the two: both
/// take every private chat, neither takes none).
pub fn needs_contacts(filter: &DialogFilter) -> bool {
    filter.contacts != filter.non_contacts
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

/// One page of the dialogs `filter` holds, and, on the first page, how many it holds in all
/// (0 on later pages: counting them all is most of a page's cost, and the first page told it).
/// `contacts`: the owner's contacts, needed when [`needs_contacts`].
pub async fn page(
    pool: &PgPool,
    owner: i64,
    filter: &DialogFilter,
    contacts: &[i64],
    offset: Offset,
    limit: i32,
) -> Result<(Vec<Dialog>, i32), sqlx::Error> {
    let ids = |peers: &[Peer]| -> Vec<i64> { peers.iter().filter_map(Peer::user_id).collect() };
    let pinned = ids(&filter.pinned_peers);
    let excluded = ids(&filter.exclude_peers);
    let included = ids(&filter.include_peers);
    let mut rows: HashMap<i64, DialogRow> = store::dialog_rows(pool, owner, &pinned)
        .await?
        .into_iter()
        .filter(|r| r.listed() && !excluded.contains(&r.peer()))
        .map(|r| (r.peer(), r))
        .collect();
    let pinned_listed: Vec<i64> = pinned
        .iter()
        .copied()
        .filter(|p| rows.contains_key(p))
        .collect();
    let (skip, after) = match offset {
        Offset::First => (0, None),
        Offset::AfterPinned(peer) => (
            pinned_listed
                .iter()
                .position(|p| *p == peer)
                .map_or(pinned_listed.len(), |i| i + 1),
            None,
        ),
        Offset::After(date, id, peer) => (pinned_listed.len(), Some((date, id, peer))),
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
    let first = matches!(offset, Offset::First);
    if !filter.contacts && !filter.non_contacts {
        // Only the included peers: their dialogs by primary key, not a scan of every dialog.
        let mut rest: Vec<Dialog> = store::dialog_rows(pool, owner, &included)
            .await?
            .into_iter()
            .filter(|r| r.listed() && !excluded.contains(&r.peer()) && !pinned.contains(&r.peer()))
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
    let now = chrono::Utc::now().timestamp();
    let rest_limit = limit as i64 - dialogs.len() as i64;
    if rest_limit > 0 {
        let rest: Vec<DialogRow> = sqlx::query_as(concat!(
            include_str!("../sql/filter_page_head.sql"),
            include_str!("../sql/filter_match.sql"),
            include_str!("../sql/filter_rules.sql"),
            include_str!("../sql/filter_page_tail.sql"),
        ))
        .bind(owner)
        .bind(after.0)
        .bind(after.1)
        .bind(after.2)
        .bind(rest_limit)
        .bind(&pinned)
        .bind(&excluded)
        .bind(&included)
        .bind(filter.contacts)
        .bind(filter.non_contacts)
        .bind(contacts)
        .bind(filter.exclude_muted)
        .bind(filter.exclude_read)
        .bind(filter.exclude_archived)
        .bind(now)
        .fetch_all(pool)
        .await?;
        dialogs.extend(rest.into_iter().map(|r| Dialog {
            // Pinned in its folder, not in this filter.
            pinned: false,
            ..Dialog::from(r)
        }));
    }
    if !first {
        return Ok((dialogs, 0));
    }
    let rules = Rules {
        owner,
        pinned: &pinned,
        excluded: &excluded,
        included: &included,
        filter,
        contacts,
        now,
    };
    Ok((
        dialogs,
        pinned_listed.len() as i32 + count(pool, &rules).await?,
    ))
}

/// What a filter's statements take, bound in the one order they share ($1 the owner, $6..$8
/// the peers, $9..$15 the rules; $2..$5 are a page's seek key and limit).
struct Rules<'a> {
    owner: i64,
    pinned: &'a [i64],
    excluded: &'a [i64],
    included: &'a [i64],
    filter: &'a DialogFilter,
    contacts: &'a [i64],
    now: i64,
}

impl Rules<'_> {
    fn bind<'q, O>(
        &'q self,
        query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
        contacts: &'q [i64],
        categories: (bool, bool),
    ) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
        query
            .bind(self.owner)
            .bind(0i64)
            .bind(0i64)
            .bind(0i64)
            .bind(0i64)
            .bind(self.pinned)
            .bind(self.excluded)
            .bind(self.included)
            .bind(categories.0)
            .bind(categories.1)
            .bind(contacts)
            .bind(self.filter.exclude_muted)
            .bind(self.filter.exclude_read)
            .bind(self.filter.exclude_archived)
            .bind(self.now)
    }
}

/// How many dialogs a filter holds besides its pinned peers, without reading the list: the
/// dialogs its rules take, from the per-owner counts (sql/filter_count_all.sql) and, when it
/// takes contacts or non-contacts only, one probe per contact; then corrected around its
/// peers (taken by the rules but pinned or excluded; included though the rules leave them).
async fn count(pool: &PgPool, r: &Rules<'_>) -> Result<i32, sqlx::Error> {
    let f = r.filter;
    let all = || async {
        let (n,): (i32,) = r
            .bind(
                sqlx::query_as(include_str!("../sql/filter_count_all.sql")),
                &[],
                (true, true),
            )
            .fetch_one(pool)
            .await?;
        Ok::<_, sqlx::Error>(n)
    };
    let of_contacts = || async {
        let (n,): (i32,) = r
            .bind(
                sqlx::query_as(concat!(
                    include_str!("../sql/filter_count_contacts.sql"),
                    include_str!("../sql/filter_rules.sql"),
                )),
                r.contacts,
                (true, false),
            )
            .fetch_one(pool)
            .await?;
        Ok::<_, sqlx::Error>(n)
    };
    let taken = match (f.contacts, f.non_contacts) {
        (true, true) => all().await?,
        (true, false) => of_contacts().await?,
        (false, true) => all().await? - of_contacts().await?,
        (false, false) => 0,
    };
    let (taken_apart, included_besides): (i32, i32) = r
        .bind(
            sqlx::query_as(concat!(
                include_str!("../sql/filter_count_peers.sql"),
                include_str!("../sql/filter_rules.sql"),
                include_str!("../sql/filter_count_peers_tail.sql"),
            )),
            r.contacts,
            (f.contacts, f.non_contacts),
        )
        .fetch_one(pool)
        .await?;
    Ok(taken - taken_apart + included_besides)
}
