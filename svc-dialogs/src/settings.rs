//! Changing a user's dialog settings: pins and their order, folders, the unread mark,
//! notification settings, drafts, dialog filters and their order. A change is checked here
//! against her dialogs as the projection has them, then logged: one event for her update
//! log, written to the outbox in its own transaction and handed on at once. The projection
//! applies it when the log hands it back (`crate::apply_settings`), in pts order with
//! everything else, so GetDialogs and every device that applies the log agree. The call
//! answers with the update as logged once it is applied here, or, when the log did not
//! answer in time, with pts 0 (the relay delivers it, and the device finds it by
//! getDifference).

use std::time::Duration;

use oxigram_errors::{Error, ErrorCode, status};
use oxigram_outbox::Outbox;
use oxigram_proto::{
    dialog_rules::{MAX_PINNED_DIALOGS, is_folder},
    types::v1::{PtsUpdate, Update, UserEvent, update},
};
use sqlx::PgPool;
use tokio::time::Instant;
use tonic::Status;
use uuid::Uuid;

use crate::{outbound::ToUpdates, read::until, store};

/// Longest a change waits for the projection to apply it before answering.
const APPLY_WAIT_CAP: Duration = Duration::from_secs(2);

/// What a settings call needs to log a change.
pub struct Logger<'a> {
    pub pool: &'a PgPool,
    pub outbox: &'a Outbox,
    pub to_updates: &'a ToUpdates,
}

impl Logger<'_> {
    /// Logs `kind` in `owner`'s log, made by the device `auth_key_id` (which gets no push:
    /// the answer is its copy).
    pub async fn log(
        &self,
        owner: i64,
        auth_key_id: i64,
        kind: update::Kind,
    ) -> Result<PtsUpdate, Status> {
        let event_id = Uuid::new_v4();
        let update = Update { kind: Some(kind) };
        let event = UserEvent {
            event_id: event_id.to_string(),
            user_id: owner,
            pts_count: 1,
            date: chrono::Utc::now().timestamp(),
            update: Some(update.clone()),
            origin_auth_key_id: auth_key_id,
            ..Default::default()
        };
        let date = event.date;
        let mut tx = self.pool.begin().await.map_err(Error::from)?;
        let rows = store::enqueue(&mut tx, self.outbox, std::slice::from_ref(&event))
            .await
            .map_err(Error::from)?;
        tx.commit().await.map_err(Error::from)?;
        let pts = self
            .to_updates
            .log(self.outbox, vec![event], &rows)
            .await
            .and_then(|appended| appended.into_iter().next())
            .map_or(0, |a| a.pts);
        if pts > 0 {
            // Should the wait run out, the change is logged and GetDialogs shows it shortly.
            let deadline = Instant::now() + APPLY_WAIT_CAP;
            until(deadline, || async {
                Ok(store::log_position(self.pool, owner).await? >= pts)
            })
            .await
            .map_err(Error::from)?;
        }
        Ok(PtsUpdate {
            pts,
            pts_count: 1,
            date,
            update: Some(update),
        })
    }
}

/// `FOLDER_ID_INVALID` for a folder other than the main list and the archive.
pub fn check_folder(folder_id: i32) -> Result<(), Status> {
    if !is_folder(folder_id) {
        return Err(status(
            ErrorCode::FolderIdInvalid,
            "a folder is 0 (the main list) or 1 (the archive)",
        ));
    }
    Ok(())
}

fn too_many_pinned() -> Status {
    status(
        ErrorCode::PinnedDialogsTooMuch,
        &format!("a folder pins at most {MAX_PINNED_DIALOGS} dialogs"),
    )
}

fn no_dialog() -> Status {
    status(
        ErrorCode::PeerIdInvalid,
        "the caller has no dialog with this peer",
    )
}

/// Pinning: the dialog must exist, and its folder must have room (a dialog pinned already
/// changes nothing, and is logged all the same: a device that missed it learns it).
pub async fn check_pin(pool: &PgPool, owner: i64, peer: i64, pinned: bool) -> Result<(), Status> {
    let place = store::place(pool, owner, peer)
        .await
        .map_err(Error::from)?
        .filter(|p| p.listed)
        .ok_or_else(no_dialog)?;
    if pinned && !place.pinned {
        let count = store::pinned(pool, owner, place.folder_id)
            .await
            .map_err(Error::from)?
            .len();
        if count >= MAX_PINNED_DIALOGS {
            return Err(too_many_pinned());
        }
    }
    Ok(())
}

/// The pinned order of `folder` after a reorder: `order` (each peer a dialog of the folder,
/// each once), then, unless `force`, the folder's other pinned dialogs in their order.
pub async fn pinned_order(
    pool: &PgPool,
    owner: i64,
    folder: i32,
    order: Vec<i64>,
    force: bool,
) -> Result<Vec<i64>, Status> {
    check_folder(folder)?;
    let mut result: Vec<i64> = Vec::with_capacity(order.len());
    for peer in order {
        if !result.contains(&peer) {
            result.push(peer);
        }
    }
    if result.len() > MAX_PINNED_DIALOGS {
        return Err(too_many_pinned());
    }
    let rows = store::dialog_rows(pool, owner, &result)
        .await
        .map_err(Error::from)?;
    let in_folder = |peer: &i64| {
        rows.iter()
            .any(|r| r.peer() == *peer && r.listed() && r.folder() == folder)
    };
    if !result.iter().all(in_folder) {
        return Err(status(
            ErrorCode::PeerIdInvalid,
            "every peer of the order is a dialog of the folder",
        ));
    }
    if !force {
        let pinned = store::pinned(pool, owner, folder)
            .await
            .map_err(Error::from)?;
        for peer in pinned {
            if !result.contains(&peer) {
                result.push(peer);
            }
        }
        if result.len() > MAX_PINNED_DIALOGS {
            return Err(too_many_pinned());
        }
    }
    Ok(result)
}
