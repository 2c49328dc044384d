//! The update log's SQL: assigning pts (one append path, from the pts a worker remembers or
//! under the users' row locks), logging reads, and reading slices back.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::LazyLock,
};

use oxigram_outbox::{NewRow, Outbox, Staged};
use oxigram_proto::{
    types::v1::{
        Peer, PtsUpdate, PushJob, Update, UpdateReadHistoryInbox, UpdatesState, UserEvent, update,
    },
    updates::v1::Appended,
};
use oxigram_storage::{
    batch_row,
    unnest::{BatchRow, Statement},
};
use prost::Message as _;
use sqlx::{Executor, PgConnection, PgPool, Postgres, Row};
use uuid::Uuid;

use crate::{TO_DIALOGS, TO_DISPATCH};

/// An event checked at the boundary.
pub struct ValidEvent {
    pub event_id: Uuid,
    pub event: UserEvent,
    /// The trace of the request that brought it: its push job continues that trace.
    pub traceparent: Option<String>,
}

/// What one append wrote: one `Appended` per input event, in input order, and what it stored
/// for svc-dispatch and svc-dialogs (outbox ids and rows, for the fast path).
#[derive(Default)]
pub struct Written {
    pub appended: Vec<Appended>,
    pub job_ids: Vec<i64>,
    pub jobs: Vec<NewRow>,
}

/// Each user's pts and retention floor as this worker's last committed append left them.
/// Every user's events go to one worker, so this is exact unless another process wrote for
/// the user since. Bounded: it starts over past `MAX_REMEMBERED` users.
#[derive(Default)]
pub struct LastPts(HashMap<i64, (i32, i32)>);

const MAX_REMEMBERED: usize = 200_000;

impl LastPts {
    /// The pts each user of `unique` starts from, when every one is remembered and none of
    /// them needs a trim after this batch: the batch can then be one statement.
    fn starts(&self, unique: &[&ValidEvent], retain: u32) -> Option<HashMap<i64, i32>> {
        let mut after: HashMap<i64, (i32, i32, i32)> = HashMap::new();
        for e in unique {
            let user = e.event.user_id;
            let &(pts, trimmed) = self.0.get(&user)?;
            after.entry(user).or_insert((pts, pts, trimmed)).1 += e.event.pts_count;
        }
        after
            .into_iter()
            .map(|(user, (from, to, trimmed))| {
                trim_floor(to, trimmed, retain)
                    .is_none()
                    .then_some((user, from))
            })
            .collect()
    }

    fn remember(&mut self, moved: impl IntoIterator<Item = (i64, (i32, i32))>) {
        if self.0.len() > MAX_REMEMBERED {
            self.0.clear();
        }
        self.0.extend(moved);
    }

    /// The users' new pts after a one-statement append (which trims nothing).
    fn moved(&mut self, moved: &HashMap<i64, i32>) {
        for (user, &pts) in moved {
            if let Some(state) = self.0.get_mut(user) {
                state.0 = pts;
            }
        }
    }

    fn forget<'a>(&mut self, users: impl IntoIterator<Item = &'a i64>) {
        for user in users {
            self.0.remove(user);
        }
    }
}

/// The new retention floor of a user at `pts` whose log is kept from `trimmed`, when it is due:
/// retention trims in steps of a tenth of it, so a trim is rare and batched.
fn trim_floor(pts: i32, trimmed: i32, retain: u32) -> Option<i32> {
    let keep_from = pts - retain as i32;
    (keep_from - trimmed > (retain as i32 / 10).max(1)).then_some(keep_from)
}

/// Appends events, assigning pts per user; events already logged keep their pts.
///
/// One path: the batch's users' pts are where it starts from, [`Planned`] gives every new
/// event its pts, and one statement writes the log rows, moves the users' pts and stages what
/// is handed on ([`write`]). The pts come from the worker's memory when the guard allows
/// ([`LastPts::starts`]: every user remembered, no trim due): the batch is then that one
/// statement in its own implicit transaction, with no BEGIN and no COMMIT round trip, which
/// under load cost as much as the statements. It fails as a whole when a user's pts moved
/// elsewhere or an event was logged before; otherwise, and then, the pts come from the
/// users' locked rows ([`lock`]), in a transaction that also trims, and the worker relearns
/// the users.
pub async fn append(
    pool: &PgPool,
    outbox: &Outbox,
    events: Vec<ValidEvent>,
    retain: u32,
    last: &mut LastPts,
) -> Result<Written, sqlx::Error> {
    // Each event once, at its first place in the batch.
    let mut seen = HashSet::new();
    let unique: Vec<&ValidEvent> = events
        .iter()
        .filter(|e| seen.insert((e.event.user_id, e.event_id)))
        .collect();
    if unique.is_empty() {
        return Ok(Written::default());
    }
    if let Some(starts) = last.starts(&unique, retain) {
        let planned = Planned::new(&unique, HashMap::new(), starts)?;
        let moves = planned.moves()?;
        match write(pool, outbox, planned, &moves).await {
            Ok(planned) => {
                last.moved(&planned.moved);
                return Ok(planned.written(&events));
            }
            Err(err) => {
                tracing::debug!(error = %err, "a one-statement append failed; the batch locks its users");
                last.forget(moves.iter().map(|m| &m.user_id));
            }
        }
    }
    let mut tx = pool.begin().await?;
    let Locked {
        known,
        starts,
        mut state,
    } = lock(&mut tx, &unique).await?;
    let mut planned = Planned::new(&unique, known, starts)?;
    if !planned.jobs.is_empty() {
        for (&user, (pts, trimmed)) in state.iter_mut() {
            if let Some(keep_from) = trim_floor(*pts, *trimmed, retain) {
                sqlx::query(include_str!("../sql/trim.sql"))
                    .bind(user)
                    .bind(keep_from)
                    .execute(&mut *tx)
                    .await?;
                *trimmed = keep_from;
            }
        }
        // The rows moved under their locks already.
        planned = write(&mut *tx, outbox, planned, &[]).await?;
    }
    tx.commit().await?;
    last.remember(state);
    Ok(planned.written(&events))
}

batch_row! {
    /// A user's pts moving from where a batch started to where it ends.
    struct StateMove {
        user_id: i64,
        from_pts: i32,
        to_pts: i32,
    }
}

batch_row! {
    /// An update_log row.
    struct LogRow {
        user_id: i64,
        pts: i32,
        pts_count: i32,
        event_id: Uuid,
        /// Unix seconds.
        date: i64,
        /// An encoded `Update`.
        body: Vec<u8>,
    }
}

/// Writes a planned batch: its log rows, the `moves` of its users' pts, and the rows it hands
/// on, in one statement (sql/append_write.sql); fills in the outbox ids.
async fn write<'e>(
    db: impl Executor<'e, Database = Postgres>,
    outbox: &Outbox,
    mut planned: Planned,
    moves: &[StateMove],
) -> Result<Planned, sqlx::Error> {
    static WRITE: LazyLock<String> = LazyLock::new(|| {
        let own = Statement::new(include_str!("../sql/append_write.sql"))
            .rows::<StateMove>("moves")
            .rows::<LogRow>("log");
        Staged::statement(&own.clone().into_sql(), own.next_parameter())
    });
    let job_ids = {
        let staged = outbox.stage(&planned.jobs);
        let query = sqlx::query_as(WRITE.as_str());
        let query = LogRow::bind(&planned.log, StateMove::bind(moves, query));
        let returned = staged.bind(query).fetch_all(db).await?;
        staged.ids(returned)?
    };
    planned.job_ids = job_ids;
    Ok(planned)
}

batch_row! {
    /// An event as the lock statement looks it up.
    struct EventKey {
        user_id: i64,
        event_id: Uuid,
        pts_count: i32,
    }
}

/// A row of the lock statement: a moved user's state (no event id), or an event logged before.
#[derive(sqlx::FromRow)]
struct LockRow {
    user_id: i64,
    event_id: Option<Uuid>,
    pts: i32,
    trimmed_pts: Option<i32>,
    pts_count: Option<i32>,
}

/// What the lock statement found.
struct Locked {
    /// (user, event) → (pts, pts_count) of the events logged before.
    known: HashMap<(i64, Uuid), (i32, i32)>,
    /// Each moved user's pts before the batch.
    starts: HashMap<i64, i32>,
    /// Each moved user's pts and retention floor after it.
    state: BTreeMap<i64, (i32, i32)>,
}

/// Locks the batch's users' rows and moves their pts past the batch's new events
/// (sql/append_lock.sql), inside `tx`.
async fn lock(tx: &mut PgConnection, unique: &[&ValidEvent]) -> Result<Locked, sqlx::Error> {
    static LOCK: LazyLock<String> = LazyLock::new(|| {
        Statement::new(include_str!("../sql/append_lock.sql"))
            .rows::<EventKey>("events")
            .into_sql()
    });
    let keys: Vec<EventKey> = unique
        .iter()
        .map(|e| EventKey {
            user_id: e.event.user_id,
            event_id: e.event_id,
            pts_count: e.event.pts_count,
        })
        .collect();
    let rows: Vec<LockRow> = EventKey::bind(&keys, sqlx::query_as(LOCK.as_str()))
        .fetch_all(&mut *tx)
        .await?;
    let mut state: BTreeMap<i64, (i32, i32)> = BTreeMap::new();
    let mut known: HashMap<(i64, Uuid), (i32, i32)> = HashMap::new();
    for r in rows {
        match (r.event_id, r.trimmed_pts, r.pts_count) {
            (None, Some(trimmed), _) => state.insert(r.user_id, (r.pts, trimmed)),
            (Some(event_id), _, Some(count)) => known.insert((r.user_id, event_id), (r.pts, count)),
            _ => {
                return Err(sqlx::Error::Protocol(format!(
                    "the lock statement answered a partial row for user {}",
                    r.user_id
                )));
            }
        };
    }
    // Each moved user's pts before the batch: her new pts less her new events' counts.
    let mut starts: HashMap<i64, i32> = state.iter().map(|(&u, &(pts, _))| (u, pts)).collect();
    for e in unique
        .iter()
        .filter(|e| !known.contains_key(&(e.event.user_id, e.event_id)))
    {
        let pts = starts.get_mut(&e.event.user_id).ok_or_else(|| {
            sqlx::Error::Protocol(format!("no pts was moved for user {}", e.event.user_id))
        })?;
        *pts -= e.event.pts_count;
    }
    Ok(Locked {
        known,
        starts,
        state,
    })
}

/// A read of a dialog as svc-dialogs counted it, against the reader's log up to `basis_pts`.
pub struct ReadRequest {
    pub event_id: Uuid,
    pub user_id: i64,
    pub peer_user_id: i64,
    pub basis_pts: i32,
    pub read_max_id: i64,
    pub max_id: i64,
    pub still_unread_count: i32,
    /// 0: read everything.
    pub requested_max_id: i64,
    pub date: i64,
    pub origin_auth_key_id: i64,
    pub traceparent: Option<String>,
}

/// What logging a read did.
pub enum ReadOutcome {
    /// The read is in the log at `pts` (logged now, or by an earlier call); `written` holds the
    /// rows to hand on (none for an earlier call's).
    Appended {
        pts: i32,
        written: (Vec<i64>, Vec<NewRow>),
    },
    /// The watermark is there already; the user's pts is `pts`.
    Unchanged { pts: i32 },
    /// A delete logged after the basis names messages the read's count may have included:
    /// svc-dialogs counts again once it has applied the log up to `pts`.
    Recount { pts: i32 },
    /// The log moved too far past the basis to bring the read up to date here (or was trimmed
    /// past it): svc-dialogs is far behind, and the caller retries later.
    BasisTooOld,
}

/// Most logged updates a read is brought up to date over.
pub const MAX_READ_CATCH_UP: i32 = 10_000;

/// Logs a read, brought up to its place in the reader's log (a transaction of a few statements
/// under her row lock). The updates logged after the basis that svc-dialogs had not counted
/// are counted here: the peer's messages above the read's max_id stay unread (unless deleted
/// since), a read of everything also covers the peer's messages logged since, and reads
/// logged since keep the watermark from going back. So the read's `max_id` and `still_unread_count` agree with the
/// messages before it in her log. The append workers learn of the moved pts when their next
/// one-statement append for her fails and they take the locking path.
pub async fn append_read(
    pool: &PgPool,
    outbox: &Outbox,
    r: &ReadRequest,
) -> Result<ReadOutcome, sqlx::Error> {
    let user_id = r.user_id;
    let mut tx = pool.begin().await?;
    // Index update_log_event.
    let known: Option<i32> =
        sqlx::query_scalar("SELECT pts FROM update_log WHERE user_id = $1 AND event_id = $2")
            .bind(user_id)
            .bind(r.event_id)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some(pts) = known {
        return Ok(ReadOutcome::Appended {
            pts,
            written: (vec![], vec![]),
        });
    }
    // Primary key of user_state: held until commit, so nothing is logged for her meanwhile.
    let state: Option<(i32, i32)> =
        sqlx::query_as("SELECT pts, trimmed_pts FROM user_state WHERE user_id = $1 FOR UPDATE")
            .bind(user_id)
            .fetch_optional(&mut *tx)
            .await?;
    // Without a log there is nothing to read.
    let Some((pts, trimmed)) = state else {
        return Ok(ReadOutcome::Unchanged { pts: 0 });
    };
    let basis = r.basis_pts.min(pts);
    if basis < trimmed || pts - basis > MAX_READ_CATCH_UP {
        return Ok(ReadOutcome::BasisTooOld);
    }
    // Primary key of update_log: her updates since the basis.
    let bodies: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT body FROM update_log WHERE user_id = $1 AND pts > $2 ORDER BY pts",
    )
    .bind(user_id)
    .bind(basis)
    .fetch_all(&mut *tx)
    .await?;
    let (mut watermark, mut arrived) = (r.read_max_id, Vec::new());
    // Every message logged since the basis, and the ids deleted since.
    let (mut logged, mut deleted) = (HashSet::new(), HashSet::new());
    for body in bodies {
        let update =
            Update::decode(body.as_slice()).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        match update.kind {
            Some(update::Kind::NewMessage(new)) => {
                if let Some(m) = new.message {
                    logged.insert(m.id);
                    if !m.out && m.peer_user() == r.peer_user_id {
                        arrived.push(m.id);
                    }
                }
            }
            Some(update::Kind::DeleteMessages(d)) => deleted.extend(d.ids),
            Some(update::Kind::ReadHistoryInbox(read)) if read.peer_user() == r.peer_user_id => {
                watermark = watermark.max(read.max_id);
            }
            _ => {}
        }
    }
    // A message deleted since the basis counts no more. One applied before the basis and above
    // the read's target may be among those svc-dialogs counted: only it can tell.
    if deleted
        .iter()
        .any(|id| *id > r.max_id && !logged.contains(id))
    {
        return Ok(ReadOutcome::Recount { pts });
    }
    arrived.retain(|id| !deleted.contains(id));
    // Only a read that went up to the dialog's top message can reach past it.
    let max_id = arrived
        .iter()
        .copied()
        .filter(|id| r.requested_max_id == 0 || *id <= r.requested_max_id)
        .fold(r.max_id, i64::max);
    if max_id <= watermark {
        return Ok(ReadOutcome::Unchanged { pts });
    }
    let still_unread =
        r.still_unread_count + arrived.iter().filter(|id| **id > max_id).count() as i32;
    let event = ValidEvent {
        event_id: r.event_id,
        event: UserEvent {
            event_id: r.event_id.to_string(),
            user_id,
            pts_count: 1,
            date: r.date,
            update: Some(Update {
                kind: Some(update::Kind::ReadHistoryInbox(UpdateReadHistoryInbox {
                    peer: Some(Peer::user(r.peer_user_id)),
                    max_id,
                    still_unread_count: still_unread,
                })),
            }),
            origin_auth_key_id: r.origin_auth_key_id,
            ..Default::default()
        },
        traceparent: r.traceparent.clone(),
    };
    // Her row, locked above, moves by one with the log row.
    let planned = Planned::new(&[&event], HashMap::new(), HashMap::from([(user_id, pts)]))?;
    let moves = planned.moves()?;
    let planned = write(&mut *tx, outbox, planned, &moves).await?;
    tx.commit().await?;
    Ok(ReadOutcome::Appended {
        pts: pts + 1,
        written: (planned.job_ids, planned.jobs),
    })
}

/// A batch's pts: the events logged before keep theirs; the new ones get the next of their
/// user's, in input order, with their log rows and push jobs.
struct Planned {
    /// (user, event) → (pts, pts_count) of every event of the batch.
    pts: HashMap<(i64, Uuid), (i32, i32)>,
    /// The pts each user with new events starts from.
    starts: HashMap<i64, i32>,
    /// The pts each user with new events ends at.
    moved: HashMap<i64, i32>,
    log: Vec<LogRow>,
    jobs: Vec<NewRow>,
    job_ids: Vec<i64>,
}

impl Planned {
    fn new(
        unique: &[&ValidEvent],
        known: HashMap<(i64, Uuid), (i32, i32)>,
        mut starts: HashMap<i64, i32>,
    ) -> Result<Self, sqlx::Error> {
        let mut planned = Planned {
            pts: known,
            starts: starts.clone(),
            moved: HashMap::new(),
            log: Vec::new(),
            jobs: Vec::new(),
            job_ids: Vec::new(),
        };
        for e in unique {
            let user_id = e.event.user_id;
            if planned.pts.contains_key(&(user_id, e.event_id)) {
                continue;
            }
            let slot = starts.get_mut(&user_id).ok_or_else(|| {
                sqlx::Error::Protocol(format!("no pts to start from for user {user_id}"))
            })?;
            *slot += e.event.pts_count;
            let pts = *slot;
            planned.moved.insert(user_id, pts);
            planned.log.push(LogRow {
                user_id,
                pts,
                pts_count: e.event.pts_count,
                event_id: e.event_id,
                date: e.event.date,
                body: e.event.update.clone().unwrap_or_default().encode_to_vec(),
            });
            planned
                .pts
                .insert((user_id, e.event_id), (pts, e.event.pts_count));
            let job = PushJob {
                event_id: e.event.event_id.clone(),
                user_id,
                origin_auth_key_id: e.event.origin_auth_key_id,
                update: Some(PtsUpdate {
                    pts,
                    pts_count: e.event.pts_count,
                    date: e.event.date,
                    update: e.event.update.clone(),
                }),
            };
            planned.jobs.push(NewRow {
                destination: TO_DISPATCH,
                event_id: e.event_id,
                payload: job.encode_to_vec(),
                traceparent: e.traceparent.clone(),
            });
            let logged = UserEvent {
                pts,
                ..e.event.clone()
            };
            planned.jobs.push(NewRow {
                destination: TO_DIALOGS,
                event_id: e.event_id,
                payload: logged.encode_to_vec(),
                traceparent: e.traceparent.clone(),
            });
        }
        Ok(planned)
    }

    /// Each user with new events, moving from her start to her end (users ascending).
    fn moves(&self) -> Result<Vec<StateMove>, sqlx::Error> {
        let mut moves = self
            .moved
            .iter()
            .map(|(&user_id, &to_pts)| {
                let from_pts = self.starts.get(&user_id).copied().ok_or_else(|| {
                    sqlx::Error::Protocol(format!("no pts to start from for user {user_id}"))
                })?;
                Ok(StateMove {
                    user_id,
                    from_pts,
                    to_pts,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        moves.sort_unstable_by_key(|m| m.user_id);
        Ok(moves)
    }

    /// One `Appended` per input event, in input order (repeats included).
    fn written(self, events: &[ValidEvent]) -> Written {
        let appended = events
            .iter()
            .map(|e| {
                let (pts, pts_count) = self
                    .pts
                    .get(&(e.event.user_id, e.event_id))
                    .copied()
                    .unwrap_or_default();
                Appended {
                    event_id: e.event.event_id.clone(),
                    user_id: e.event.user_id,
                    pts,
                    pts_count,
                }
            })
            .collect();
        Written {
            appended,
            job_ids: self.job_ids,
            jobs: self.jobs,
        }
    }
}

/// The user's current pts and the retention floor (primary key of user_state).
pub async fn state(pool: &PgPool, user_id: i64) -> Result<(UpdatesState, i32), sqlx::Error> {
    let row = sqlx::query("SELECT pts, trimmed_pts, updated_at FROM user_state WHERE user_id = $1")
        .bind(user_id)
        .fetch_optional(pool)
        .await?;
    Ok(match row {
        Some(r) => {
            let at: chrono::DateTime<chrono::Utc> = r.try_get("updated_at")?;
            (
                UpdatesState {
                    pts: r.try_get("pts")?,
                    date: at.timestamp(),
                },
                r.try_get("trimmed_pts")?,
            )
        }
        None => (
            UpdatesState {
                pts: 0,
                date: chrono::Utc::now().timestamp(),
            },
            0,
        ),
    })
}

/// What getDifference reads of a user: state and updates from one snapshot.
pub struct Difference {
    pub state: UpdatesState,
    /// Updates up to this pts are no longer retained.
    pub trimmed_pts: i32,
    /// Logged updates after the pts asked for, oldest first (none when it is not retained).
    pub updates: Vec<PtsUpdate>,
}

#[derive(sqlx::FromRow)]
struct DifferenceRow {
    state_pts: i32,
    trimmed_pts: i32,
    state_date: i64,
    pts: Option<i32>,
    pts_count: Option<i32>,
    date: Option<i64>,
    body: Option<Vec<u8>>,
}

/// The user's state and at most `limit` logged updates after `after_pts`, from one snapshot.
pub async fn difference(
    pool: &PgPool,
    user_id: i64,
    after_pts: i32,
    limit: i32,
) -> Result<Difference, sqlx::Error> {
    let rows: Vec<DifferenceRow> = sqlx::query_as(include_str!("../sql/difference.sql"))
        .bind(user_id)
        .bind(after_pts)
        .bind(limit as i64)
        .fetch_all(pool)
        .await?;
    let Some(first) = rows.first() else {
        return Ok(Difference {
            state: UpdatesState {
                pts: 0,
                date: chrono::Utc::now().timestamp(),
            },
            trimmed_pts: 0,
            updates: vec![],
        });
    };
    let (state, trimmed_pts) = (
        UpdatesState {
            pts: first.state_pts,
            date: first.state_date,
        },
        first.trimmed_pts,
    );
    let mut updates = Vec::with_capacity(rows.len());
    for row in rows {
        let (Some(pts), Some(pts_count), Some(date), Some(body)) =
            (row.pts, row.pts_count, row.date, row.body)
        else {
            continue;
        };
        updates.push(PtsUpdate {
            pts,
            pts_count,
            date,
            update: Some(
                Update::decode(body.as_slice()).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
            ),
        });
    }
    Ok(Difference {
        state,
        trimmed_pts,
        updates,
    })
}
