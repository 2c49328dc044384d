//! The update log's SQL: assigning pts under the user's row lock, and reading slices back.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::LazyLock,
};

use oxigram_outbox::{NewRow, Outbox, Staged};
use oxigram_proto::{
    internal::v1::Appended,
    types::v1::{PtsUpdate, PushJob, Update, UpdatesState, UserEvent},
};
use prost::Message as _;
use sqlx::{PgPool, Row};
use uuid::Uuid;

use crate::TO_DISPATCH;

/// An event checked at the boundary.
pub struct ValidEvent {
    pub event_id: Uuid,
    pub event: UserEvent,
    /// The trace of the request that brought it: its push job continues that trace.
    pub traceparent: Option<String>,
}

/// What one append wrote: one `Appended` per input event, in input order, and the push jobs
/// it stored for svc-dispatch (their outbox ids and rows, for the fast path).
pub struct Written {
    pub appended: Vec<Appended>,
    pub job_ids: Vec<i64>,
    pub jobs: Vec<NewRow>,
}

/// Appends events, assigning pts per user; events already logged keep their pts. Two
/// statements whatever the batch (and a trim when a user's log outgrew its retention): lock
/// the users and find the events already logged; write the new events, the users' pts and
/// the push jobs.
pub async fn append(
    pool: &PgPool,
    outbox: &Outbox,
    events: Vec<ValidEvent>,
    retain: u32,
) -> Result<Written, sqlx::Error> {
    let mut users: Vec<i64> = events.iter().map(|e| e.event.user_id).collect();
    users.sort_unstable();
    users.dedup();
    let (event_users, event_ids): (Vec<i64>, Vec<Uuid>) =
        events.iter().map(|e| (e.event.user_id, e.event_id)).unzip();
    let mut tx = pool.begin().await?;
    // One statement: lock every user's state row until commit (ascending ids, so concurrent
    // batches never deadlock; the only writers of their pts), and find the events already
    // logged (index update_log_event, probed once per event: the LIMIT keeps the lateral
    // subquery a nested loop, where a plain join planned while the log was small stays a hash
    // join over a scan of every partition). The lookup reads the statement's snapshot, taken
    // before any lock wait: should another instance log one of these events meanwhile, the
    // insert below breaks update_log_event and the whole batch fails and is retried, rather
    // than logging the event twice.
    let mut state: BTreeMap<i64, (i32, i32)> = BTreeMap::new();
    let mut known: HashMap<(i64, Uuid), (i32, i32)> = HashMap::new();
    let rows: Vec<(i64, Option<Uuid>, i32, i32)> = sqlx::query_as(
        "WITH locked AS (
            INSERT INTO user_state (user_id) SELECT * FROM UNNEST($1::bigint[]) ORDER BY 1
            ON CONFLICT (user_id) DO UPDATE SET updated_at = now()
            RETURNING user_id, pts, trimmed_pts
         )
         SELECT user_id, NULL::uuid, pts, trimmed_pts FROM locked
         UNION ALL
         SELECT e.user_id, e.event_id, l.pts, l.pts_count
         FROM UNNEST($2::bigint[], $3::uuid[]) AS e(user_id, event_id)
         CROSS JOIN LATERAL (
            SELECT pts, pts_count FROM update_log
            WHERE user_id = e.user_id AND event_id = e.event_id LIMIT 1) l",
    )
    .bind(&users)
    .bind(&event_users)
    .bind(&event_ids)
    .fetch_all(&mut *tx)
    .await?;
    for (user_id, event_id, pts, other) in rows {
        match event_id {
            None => state.insert(user_id, (pts, other)),
            Some(event_id) => known.insert((user_id, event_id), (pts, other)),
        };
    }

    let mut log = NewRows::default();
    let mut job_ids = Vec::new();
    let mut jobs = Vec::new();
    let mut results = Vec::with_capacity(events.len());
    for e in &events {
        let user_id = e.event.user_id;
        let (at, count) = match known.get(&(user_id, e.event_id)) {
            Some(&seen) => seen,
            None => {
                let slot = state.entry(user_id).or_insert((0, 0));
                slot.0 += e.event.pts_count;
                let pts = slot.0;
                log.push(user_id, pts, e);
                known.insert((user_id, e.event_id), (pts, e.event.pts_count));
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
                jobs.push(NewRow {
                    destination: TO_DISPATCH,
                    event_id: e.event_id,
                    payload: job.encode_to_vec(),
                    traceparent: e.traceparent.clone(),
                });
                (pts, e.event.pts_count)
            }
        };
        results.push(Appended {
            event_id: e.event.event_id.clone(),
            user_id,
            pts: at,
            pts_count: count,
        });
    }
    if !jobs.is_empty() {
        // Retention, in steps of a tenth of it so the trim is rare and batched.
        let step = (retain as i32 / 10).max(1);
        let (mut moved_users, mut moved_pts, mut moved_trimmed) = (vec![], vec![], vec![]);
        let moved: BTreeSet<i64> = log.users.iter().copied().collect();
        for (&user, &(pts, trimmed)) in state.iter().filter(|(u, _)| moved.contains(u)) {
            let keep_from = pts - retain as i32;
            let trimmed = if keep_from - trimmed > step {
                sqlx::query("DELETE FROM update_log WHERE user_id = $1 AND pts <= $2")
                    .bind(user)
                    .bind(keep_from)
                    .execute(&mut *tx)
                    .await?;
                keep_from
            } else {
                trimmed
            };
            moved_users.push(user);
            moved_pts.push(pts);
            moved_trimmed.push(trimmed);
        }
        // The log rows, the users' new pts (their rows are locked and exist: the upsert's
        // update arm finds them by primary key) and the push jobs, in one statement.
        static WRITE: LazyLock<String> = LazyLock::new(|| {
            Staged::statement(
                "log AS (
                    INSERT INTO update_log (user_id, pts, pts_count, event_id, date, body)
                    SELECT * FROM UNNEST($1::bigint[], $2::int[], $3::int[], $4::uuid[], $5::bigint[], $6::bytea[])
                 ), state AS (
                    INSERT INTO user_state (user_id, pts, trimmed_pts)
                    SELECT * FROM UNNEST($7::bigint[], $8::int[], $9::int[])
                    ON CONFLICT (user_id) DO UPDATE SET
                        pts = EXCLUDED.pts, trimmed_pts = EXCLUDED.trimmed_pts
                 )",
                10,
            )
        });
        let staged = outbox.stage(&jobs);
        let query = sqlx::query_as(WRITE.as_str())
            .bind(&log.users)
            .bind(&log.pts)
            .bind(&log.counts)
            .bind(&log.ids)
            .bind(&log.dates)
            .bind(&log.bodies)
            .bind(&moved_users)
            .bind(&moved_pts)
            .bind(&moved_trimmed);
        let returned = staged.bind(query).fetch_all(&mut *tx).await?;
        job_ids = staged.ids(returned)?;
    }
    tx.commit().await?;
    Ok(Written {
        appended: results,
        job_ids,
        jobs,
    })
}

/// The update-log rows one append inserts, as columns.
#[derive(Default)]
struct NewRows {
    users: Vec<i64>,
    pts: Vec<i32>,
    counts: Vec<i32>,
    ids: Vec<Uuid>,
    dates: Vec<i64>,
    bodies: Vec<Vec<u8>>,
}

impl NewRows {
    fn push(&mut self, user_id: i64, pts: i32, e: &ValidEvent) {
        self.users.push(user_id);
        self.pts.push(pts);
        self.counts.push(e.event.pts_count);
        self.ids.push(e.event_id);
        self.dates.push(e.event.date);
        self.bodies
            .push(e.event.update.clone().unwrap_or_default().encode_to_vec());
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

/// Logged updates after `after_pts`, oldest first, at most `limit` (primary key of update_log).
pub async fn slice(
    pool: &PgPool,
    user_id: i64,
    after_pts: i32,
    limit: i32,
) -> Result<Vec<PtsUpdate>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT pts, pts_count, date, body FROM update_log
         WHERE user_id = $1 AND pts > $2 ORDER BY pts LIMIT $3",
    )
    .bind(user_id)
    .bind(after_pts)
    .bind(limit as i64)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| {
            let body: Vec<u8> = r.try_get("body")?;
            Ok(PtsUpdate {
                pts: r.try_get("pts")?,
                pts_count: r.try_get("pts_count")?,
                date: r.try_get("date")?,
                update: Some(
                    Update::decode(body.as_slice())
                        .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
                ),
            })
        })
        .collect()
}
