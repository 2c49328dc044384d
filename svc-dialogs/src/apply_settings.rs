//! The projection's side of a user's dialog settings: each settings update of her log,
//! applied here in pts order by the same rules a device applies it (`oxigram_client::Mirror`):
//! pins (at the head of the folder, never past its most), the pinned order, folders, the
//! unread mark, notification settings, drafts, the hidden peer settings bar, dialog filters
//! and their order; and the owner's contacts, which filters of contacts or non-contacts sort
//! dialogs by. An update that names a dialog not here yet makes it (unlisted until it has a
//! message), as on a device.

use oxigram_proto::{
    dialog_rules::{MAX_PINNED_DIALOGS, filter_order},
    types::v1::{DraftMessage, update},
};
use prost::Message as _;
use sqlx::PgConnection;

/// A settings update of `owner`'s log, logged at `pts`.
pub struct SettingChange {
    pub owner: i64,
    pub pts: i32,
    pub kind: update::Kind,
}

/// Whether an update kind is a setting applied here.
pub fn is_setting(kind: &update::Kind) -> bool {
    matches!(
        kind,
        update::Kind::DialogPinned(_)
            | update::Kind::PinnedDialogs(_)
            | update::Kind::FolderPeers(_)
            | update::Kind::DialogUnreadMark(_)
            | update::Kind::NotifySettings(_)
            | update::Kind::DraftMessage(_)
            | update::Kind::DialogFilter(_)
            | update::Kind::DialogFilterOrder(_)
            | update::Kind::PeerSettingsBarHidden(_)
            | update::Kind::Contact(_)
    )
}

/// Applies one settings update (the only place each kind changes the projection).
pub async fn apply(tx: &mut PgConnection, change: SettingChange) -> Result<(), sqlx::Error> {
    let owner = change.owner;
    match change.kind {
        update::Kind::DialogPinned(u) => {
            if u.pinned {
                sqlx::query(include_str!("../sql/pin_dialog.sql"))
                    .bind(owner)
                    .bind(u.peer_user())
                    .bind(MAX_PINNED_DIALOGS as i64)
                    .execute(&mut *tx)
                    .await?;
            } else {
                // Primary key of dialogs.
                sqlx::query(
                    "UPDATE dialogs SET pinned_rank = 0 WHERE owner_id = $1 AND peer_user_id = $2",
                )
                .bind(owner)
                .bind(u.peer_user())
                .execute(&mut *tx)
                .await?;
            }
        }
        update::Kind::PinnedDialogs(u) => {
            let order: Vec<i64> = u.order.iter().map(|p| p.user_id().unwrap_or(0)).collect();
            sqlx::query(include_str!("../sql/pinned_order.sql"))
                .bind(owner)
                .bind(u.folder_id)
                .bind(&order)
                .execute(&mut *tx)
                .await?;
        }
        update::Kind::FolderPeers(u) => {
            // The last word on each peer counts, as when a device applies them one by one.
            let mut moves: Vec<(i64, i32)> = Vec::new();
            for fp in u.folder_peers.iter().rev() {
                let peer = fp.peer_user();
                if !moves.iter().any(|(p, _)| *p == peer) {
                    moves.push((peer, fp.folder_id));
                }
            }
            sqlx::query(include_str!("../sql/folder_peers.sql"))
                .bind(owner)
                .bind(moves.iter().map(|m| m.0).collect::<Vec<_>>())
                .bind(moves.iter().map(|m| m.1).collect::<Vec<_>>())
                .execute(&mut *tx)
                .await?;
        }
        update::Kind::DialogUnreadMark(u) => {
            sqlx::query(include_str!("../sql/unread_mark.sql"))
                .bind(owner)
                .bind(u.peer_user())
                .bind(u.unread)
                .execute(&mut *tx)
                .await?;
        }
        update::Kind::NotifySettings(u) => {
            let s = u.settings.unwrap_or_default();
            sqlx::query(include_str!("../sql/notify_settings.sql"))
                .bind(owner)
                .bind(u.peer_user())
                .bind(s.mute_until)
                .bind(s.show_previews)
                .bind(s.silent)
                .execute(&mut *tx)
                .await?;
        }
        update::Kind::DraftMessage(u) => {
            let peer = u.peer_user();
            match u.draft {
                Some(draft) => {
                    let draft = DraftMessage {
                        pts: change.pts,
                        ..draft
                    };
                    sqlx::query(include_str!("../sql/save_draft.sql"))
                        .bind(owner)
                        .bind(peer)
                        .bind(draft.encode_to_vec())
                        .bind(change.pts)
                        .execute(&mut *tx)
                        .await?;
                }
                None => {
                    sqlx::query(include_str!("../sql/clear_draft.sql"))
                        .bind(owner)
                        .bind(peer)
                        .bind(u.clears_pts)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        update::Kind::PeerSettingsBarHidden(u) => {
            sqlx::query(include_str!("../sql/hide_settings_bar.sql"))
                .bind(owner)
                .bind(u.peer_user())
                .execute(&mut *tx)
                .await?;
        }
        update::Kind::Contact(u) => {
            sqlx::query(include_str!("../sql/apply_contact.sql"))
                .bind(owner)
                .bind(u.user_id)
                .bind(!u.deleted)
                .execute(&mut *tx)
                .await?;
        }
        update::Kind::DialogFilter(u) => match u.filter {
            Some(filter) => {
                sqlx::query(include_str!("../sql/save_filter.sql"))
                    .bind(owner)
                    .bind(u.id)
                    .bind(filter.encode_to_vec())
                    .execute(&mut *tx)
                    .await?;
            }
            None => {
                // Primary key of dialog_filters.
                sqlx::query("DELETE FROM dialog_filters WHERE owner_id = $1 AND filter_id = $2")
                    .bind(owner)
                    .bind(u.id)
                    .execute(&mut *tx)
                    .await?;
            }
        },
        update::Kind::DialogFilterOrder(u) => {
            // Primary key of dialog_filters (its owner prefix); a user has a few.
            let current: Vec<i32> = sqlx::query_scalar(
                "SELECT filter_id FROM dialog_filters WHERE owner_id = $1 ORDER BY position",
            )
            .bind(owner)
            .fetch_all(&mut *tx)
            .await?;
            let order = filter_order(&current, &u.order);
            let positions: Vec<i32> = (1..=order.len() as i32).collect();
            sqlx::query(include_str!("../sql/filter_positions.sql"))
                .bind(owner)
                .bind(&order)
                .bind(&positions)
                .execute(&mut *tx)
                .await?;
        }
        _ => {}
    }
    Ok(())
}
