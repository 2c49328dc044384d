//! The update log's SQL: assigning pts under the user's row lock, and reading slices back.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
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
/// statements whatever the batch (and a trim when a user's log outgrew its retention): move
/// every user's pts past her new events and find the events already logged; write the new
/// events and the push jobs.
pub async fn append(
    pool: &PgPool,
    outbox: &Outbox,
    events: Vec<ValidEvent>,
    retain: u32,
) -> Result<Written, sqlx::Error> {
    // Each event once, at its first place in the batch.
    let mut seen = HashSet::new();
    let unique: Vec<&ValidEvent> = events
        .iter()
        .filter(|e| seen.insert((e.event.user_id, e.event_id)))
        .collect();
    let mut tx = pool.begin().await?;
    // One statement: find the events already logged (index update_log_event, probed once per
    // event: the LIMIT keeps the lateral subquery a nested loop, where a plain join planned
    // while the log was small stays a hash join over a scan of every partition), then add the
    // others' pts_count to their users' pts, locking those rows until commit (ascending ids,
    // so concurrent batches never deadlock; the only writers of their pts). Each user's row is
    // written once per batch, and a user's first event creates it. The lookup reads the
    // statement's snapshot, taken before any lock wait: should another instance log one of
    // these events meanwhile, the insert below breaks update_log_event and the whole batch
    // fails and is retried, rather than logging the event twice.
    let rows: Vec<(i64, Option<Uuid>, i32, i32)> = sqlx::query_as(
        "WITH e AS (
            SELECT * FROM UNNEST($1::bigint[], $2::uuid[], $3::int[]) AS e(user_id, event_id, pts_count)
         ), known AS (
            SELECT e.user_id, e.event_id, l.pts, l.pts_count
            FROM e CROSS JOIN LATERAL (
                SELECT pts, pts_count FROM update_log
                WHERE user_id = e.user_id AND event_id = e.event_id LIMIT 1) l
         ), moved AS (
            INSERT INTO user_state AS s (user_id, pts)
            SELECT e.user_id, sum(e.pts_count) FROM e
            WHERE NOT EXISTS (
                SELECT 1 FROM known k WHERE k.user_id = e.user_id AND k.event_id = e.event_id)
            GROUP BY e.user_id ORDER BY e.user_id
            ON CONFLICT (user_id) DO UPDATE SET pts = s.pts + EXCLUDED.pts, updated_at = now()
            RETURNING user_id, pts, trimmed_pts
         )
         SELECT user_id, NULL::uuid, pts, trimmed_pts FROM moved
         UNION ALL
         SELECT user_id, event_id, pts, pts_count FROM known",
    )
    .bind(unique.iter().map(|e| e.event.user_id).collect::<Vec<_>>())
    .bind(unique.iter().map(|e| e.event_id).collect::<Vec<_>>())
    .bind(unique.iter().map(|e| e.event.pts_count).collect::<Vec<_>>())
    .fetch_all(&mut *tx)
    .await?;
    // The users' pts and retention floors after this batch, and the events logged before.
    let mut state: BTreeMap<i64, (i32, i32)> = BTreeMap::new();
    let mut known: HashMap<(i64, Uuid), (i32, i32)> = HashMap::new();
    for (user_id, event_id, pts, other) in rows {
        match event_id {
            None => state.insert(user_id, (pts, other)),
            Some(event_id) => known.insert((user_id, event_id), (pts, other)),
        };
    }
    // Each moved user's pts before the batch: her new pts less her new events' counts.
    let mut next: HashMap<i64, i32> = state.iter().map(|(&u, &(pts, _))| (u, pts)).collect();
    for e in unique
        .iter()
        .filter(|e| !known.contains_key(&(e.event.user_id, e.event_id)))
    {
        let pts = next.get_mut(&e.event.user_id).ok_or_else(|| {
            sqlx::Error::Protocol(format!("no pts was moved for user {}", e.event.user_id))
        })?;
        *pts -= e.event.pts_count;
    }

    let mut log = NewRows::default();
    let mut jobs = Vec::new();
    for e in unique {
        let user_id = e.event.user_id;
        if known.contains_key(&(user_id, e.event_id)) {
            continue;
        }
        let slot = next
            .get_mut(&user_id)
            .ok_or_else(|| sqlx::Error::Protocol(format!("no pts was moved for user {user_id}")))?;
        *slot += e.event.pts_count;
        let pts = *slot;
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
    }
    let mut job_ids = Vec::new();
    if !jobs.is_empty() {
        // Retention, in steps of a tenth of it so the trim is rare and batched.
        let step = (retain as i32 / 10).max(1);
        for (&user, &(pts, trimmed)) in &state {
            let keep_from = pts - retain as i32;
            if keep_from - trimmed > step {
                // Primary key of update_log (a range of one user's pts), and of user_state.
                sqlx::query(
                    "WITH gone AS (DELETE FROM update_log WHERE user_id = $1 AND pts <= $2)
                     UPDATE user_state SET trimmed_pts = $2 WHERE user_id = $1",
                )
                .bind(user)
                .bind(keep_from)
                .execute(&mut *tx)
                .await?;
            }
        }
        // The log rows and the push jobs, in one statement.
        static WRITE: LazyLock<String> = LazyLock::new(|| {
            Staged::statement(
                "log AS (
                    INSERT INTO update_log (user_id, pts, pts_count, event_id, date, body)
                    SELECT * FROM UNNEST($1::bigint[], $2::int[], $3::int[], $4::uuid[], $5::bigint[], $6::bytea[])
                 )",
                7,
            )
        });
        let staged = outbox.stage(&jobs);
        let query = sqlx::query_as(WRITE.as_str())
            .bind(&log.users)
            .bind(&log.pts)
            .bind(&log.counts)
            .bind(&log.ids)
            .bind(&log.dates)
            .bind(&log.bodies);
        let returned = staged.bind(query).fetch_all(&mut *tx).await?;
        job_ids = staged.ids(returned)?;
    }
    tx.commit().await?;
    let appended = events
        .iter()
        .map(|e| {
            let (pts, pts_count) = known
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
    Ok(Written {
        appended,
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
