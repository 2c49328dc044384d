//! READ: a user reads a dialog up to a message. Here the read is counted against the reader's
//! update log as far as it is applied (her position): max_id 0 goes up to the dialog's top
//! message, and what stays unread is counted. svc-updates then logs it under her row lock,
//! taking into account what was logged after that position, so the read agrees with every
//! message before it in her log and a device applying the log ends with the unread count
//! `GetDialogs` gives. The read comes back here through the log, like every other update, and
//! applying it makes the sender's side of it (her messages read, for her log). The call
//! answers once both are done, so every device of either user that asks afterwards finds them.

use std::time::Duration;

use oxigram_errors::{Error, forward};
use oxigram_outbox::Outbox;
use oxigram_proto::updates::v1::AppendReadRequest;
use sqlx::PgPool;
use tokio::time::Instant;
use tonic::Status;
use uuid::Uuid;

use crate::{
    outbound::{TO_UPDATES, ToUpdates},
    store,
};

/// Longest a read waits for its own update to be applied here, and the sender's side of it to
/// be handed on, before answering; far beyond the few milliseconds a hand-off takes.
const APPLY_WAIT_CAP: Duration = Duration::from_secs(2);
/// Most times a read is counted when deletes keep landing between the count and the log.
const MAX_COUNTS: u32 = 3;
/// First and longest pause between two looks at the reader's position.
const FIRST_POLL: Duration = Duration::from_millis(2);
const MAX_POLL: Duration = Duration::from_millis(20);

/// What a read did.
pub enum Read {
    /// The watermark was there already: nothing was logged.
    Unchanged,
    /// The read is in the reader's log at this pts.
    Logged { pts: i32 },
}

/// Reads `owner`'s dialog with `peer` up to `max_id` (0: everything).
pub async fn read_history(
    pool: &PgPool,
    outbox: &Outbox,
    to_updates: &ToUpdates,
    owner: i64,
    peer: i64,
    max_id: i64,
    auth_key_id: i64,
) -> Result<Read, Status> {
    let deadline = Instant::now() + APPLY_WAIT_CAP;
    let event_id = Uuid::new_v4().to_string();
    let mut counts = 0;
    let answer = loop {
        let v = store::read_view(pool, owner, peer, max_id)
            .await
            .map_err(Error::from)?;
        let answer = to_updates
            .append_read(AppendReadRequest {
                event_id: event_id.clone(),
                user_id: owner,
                peer_user_id: peer,
                basis_pts: v.position,
                read_max_id: v.read_inbox_max_id,
                max_id: v.target,
                still_unread_count: v.still_unread as i32,
                requested_max_id: max_id,
                date: chrono::Utc::now().timestamp(),
                origin_auth_key_id: auth_key_id,
            })
            .await
            .map_err(forward)?;
        counts += 1;
        if !answer.recount {
            break answer;
        }
        // A delete logged since the count may have removed messages it included: count again
        // once it is applied here.
        let caught_up = until(deadline, || async {
            Ok(store::log_position(pool, owner).await? >= answer.pts)
        })
        .await
        .map_err(Error::from)?;
        if !caught_up || counts >= MAX_COUNTS {
            return Err(oxigram_errors::status(
                oxigram_errors::ErrorCode::Unavailable,
                "the dialog is changing under the read; retry",
            ));
        }
    };
    if !answer.appended {
        return Ok(Read::Unchanged);
    }
    // Should a wait run out, the log has the read and the rest follows it.
    let applied = until(deadline, || async {
        Ok(store::log_position(pool, owner).await? >= answer.pts)
    })
    .await
    .map_err(Error::from)?;
    // Its application wrote the sender's side to the outbox, with or before the newest row.
    let newest = if applied {
        outbox
            .newest_pending(TO_UPDATES)
            .await
            .map_err(Error::from)?
    } else {
        None
    };
    if let Some(newest) = newest {
        until(deadline, || outbox.delivered_through(TO_UPDATES, newest))
            .await
            .map_err(Error::from)?;
    }
    Ok(Read::Logged { pts: answer.pts })
}

/// Looks at `done` until it holds, pausing a little longer each time, until `deadline` at the
/// latest; `false` when the deadline came first.
pub(crate) async fn until<F, Fut>(deadline: Instant, mut done: F) -> Result<bool, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, sqlx::Error>>,
{
    let mut pause = FIRST_POLL;
    loop {
        if done().await? {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
        pause = (pause * 2).min(MAX_POLL);
    }
}
