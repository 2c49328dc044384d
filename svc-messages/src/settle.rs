//! Waiting for svc-dialogs to catch up before a read.
//!
//! svc-dialogs learns of new messages asynchronously (the outbox hand-off), while the sender's
//! call returns once svc-updates has logged them. A read made right after, with max_id 0 or
//! with an id the reader's devices already hold, would otherwise resolve and count against a
//! dialog that lacks those messages: the read would stop short of them, and its
//! `still_unread_count` would leave out messages already in the reader's log, so her devices
//! and the server would disagree on the unread count from then on. Rows of the outbox are
//! deleted only after svc-dialogs acknowledged them, so "no pending row up to the newest one
//! seen at the start" means every message committed before the read has been applied.

use std::time::Duration;

use sqlx::PgPool;
use tokio::time::Instant;

use crate::TO_DIALOGS;

/// First and longest pause between two looks at the outbox.
const FIRST_POLL: Duration = Duration::from_millis(2);
const MAX_POLL: Duration = Duration::from_millis(20);

/// Waits until svc-dialogs has applied every row for it that was committed before this call,
/// for at most `cap`. `false` when the cap ran out first (svc-dialogs is down or far behind:
/// the relay delivers the rest later, and the read goes ahead with what was applied).
pub async fn dialogs_caught_up(pool: &PgPool, cap: Duration) -> Result<bool, sqlx::Error> {
    // Index outbox_due: the pending rows of one destination (a handful, or a backlog).
    let newest: Option<i64> =
        sqlx::query_scalar("SELECT max(id) FROM outbox WHERE destination = $1 AND status = 0")
            .bind(TO_DIALOGS)
            .fetch_one(pool)
            .await?;
    let Some(newest) = newest else {
        return Ok(true);
    };
    let deadline = Instant::now() + cap;
    let mut pause = FIRST_POLL;
    loop {
        // Rows were pending at the last look (or just now): pause before the next one.
        tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
        pause = (pause * 2).min(MAX_POLL);
        // Index outbox_due again; rows past `newest` are later sends, which need not wait.
        let pending: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM outbox WHERE destination = $1 AND status = 0 AND id <= $2)",
        )
        .bind(TO_DIALOGS)
        .bind(newest)
        .fetch_one(pool)
        .await?;
        if !pending {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
    }
}
