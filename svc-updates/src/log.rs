//! The update log's SQL: assigning pts under the user's row lock, and reading slices back.

use std::collections::{BTreeMap, HashMap};

use oxigram_outbox::{HandOff, Outbox};
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
}

/// Appends events, assigning pts per user; events already logged keep their pts.
/// Returns one `Appended` per input event, in input order.
pub async fn append(
    pool: &PgPool,
    outbox: &Outbox,
    events: Vec<ValidEvent>,
    retain: u32,
) -> Result<Vec<Appended>, sqlx::Error> {
    // Users are locked in ascending id order, so concurrent batches never deadlock.
    let mut by_user: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        by_user.entry(e.event.user_id).or_default().push(i);
    }
    let mut results: Vec<Option<Appended>> = vec![None; events.len()];
    let mut tx = pool.begin().await?;
    for (user_id, indexes) in by_user {
        // Locks the user's state row until commit: the only writer of this user's pts.
        let state = sqlx::query(
            "INSERT INTO user_state (user_id) VALUES ($1)
             ON CONFLICT (user_id) DO UPDATE SET updated_at = now()
             RETURNING pts, trimmed_pts",
        )
        .bind(user_id)
        .fetch_one(&mut *tx)
        .await?;
        let mut pts: i32 = state.try_get("pts")?;
        let trimmed: i32 = state.try_get("trimmed_pts")?;
        let ids: Vec<Uuid> = indexes.iter().map(|&i| events[i].event_id).collect();
        // Index update_log_event.
        let mut known: HashMap<Uuid, (i32, i32)> = sqlx::query(
            "SELECT event_id, pts, pts_count FROM update_log WHERE user_id = $1 AND event_id = ANY($2)",
        )
        .bind(user_id)
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|r| Ok((r.try_get("event_id")?, (r.try_get("pts")?, r.try_get("pts_count")?))))
        .collect::<Result<_, sqlx::Error>>()?;
        let start_pts = pts;
        let (mut new_pts, mut new_counts, mut new_ids, mut new_dates, mut new_bodies) =
            (vec![], vec![], vec![], vec![], vec![]);
        for &i in &indexes {
            let e = &events[i];
            let (at, count) = match known.get(&e.event_id) {
                Some(&seen) => seen,
                None => {
                    pts += e.event.pts_count;
                    let body = e.event.update.clone().unwrap_or_default().encode_to_vec();
                    new_pts.push(pts);
                    new_counts.push(e.event.pts_count);
                    new_ids.push(e.event_id);
                    new_dates.push(e.event.date);
                    new_bodies.push(body);
                    known.insert(e.event_id, (pts, e.event.pts_count));
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
                    outbox
                        .enqueue(
                            &mut tx,
                            TO_DISPATCH,
                            e.event_id,
                            &job.encode_to_vec(),
                            HandOff::Relay,
                        )
                        .await?;
                    (pts, e.event.pts_count)
                }
            };
            results[i] = Some(Appended {
                event_id: e.event.event_id.clone(),
                user_id,
                pts: at,
                pts_count: count,
            });
        }
        if pts != start_pts {
            sqlx::query(
                "INSERT INTO update_log (user_id, pts, pts_count, event_id, date, body)
                 SELECT $1, * FROM UNNEST($2::int[], $3::int[], $4::uuid[], $5::bigint[], $6::bytea[])",
            )
            .bind(user_id)
            .bind(&new_pts)
            .bind(&new_counts)
            .bind(&new_ids)
            .bind(&new_dates)
            .bind(&new_bodies)
            .execute(&mut *tx)
            .await?;
            // Retention, in steps of a tenth of it so the trim is rare and batched.
            let keep_from = pts - retain as i32;
            let new_trimmed = if keep_from - trimmed > (retain as i32 / 10).max(1) {
                sqlx::query("DELETE FROM update_log WHERE user_id = $1 AND pts <= $2")
                    .bind(user_id)
                    .bind(keep_from)
                    .execute(&mut *tx)
                    .await?;
                keep_from
            } else {
                trimmed
            };
            sqlx::query("UPDATE user_state SET pts = $2, trimmed_pts = $3 WHERE user_id = $1")
                .bind(user_id)
                .bind(pts)
                .bind(new_trimmed)
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await?;
    outbox.wake(TO_DISPATCH);
    Ok(results.into_iter().flatten().collect())
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
