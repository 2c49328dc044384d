//! The rules of a user's dialog settings that the server and every client apply alike: how
//! many dialogs a folder pins, which folders there are, and the hash of a page of dialogs
//! that lets a client skip an unchanged page.

use crate::types::v1::Dialog;

/// The main list.
pub const FOLDER_MAIN: i32 = 0;
/// The archive.
pub const FOLDER_ARCHIVE: i32 = 1;
/// Most dialogs a folder pins (and most pinned peers of a dialog filter).
pub const MAX_PINNED_DIALOGS: usize = 100;
/// `mute_until` that mutes for good.
pub const MUTE_FOREVER: i64 = i32::MAX as i64;

/// The order of a user's dialog filters after she asks for `order`: the filters it names that
/// exist, in its order, then the others in the order they had (one made meanwhile).
pub fn filter_order(current: &[i32], order: &[i32]) -> Vec<i32> {
    let mut result: Vec<i32> = Vec::with_capacity(current.len());
    for id in order {
        if current.contains(id) && !result.contains(id) {
            result.push(*id);
        }
    }
    for id in current {
        if !result.contains(id) {
            result.push(*id);
        }
    }
    result
}

/// Whether `folder_id` names a folder.
pub fn is_folder(folder_id: i32) -> bool {
    folder_id == FOLDER_MAIN || folder_id == FOLDER_ARCHIVE
}

/// One step of the hash: the rolling hash Telegram clients use for their lists.
fn step(hash: u64, value: u64) -> u64 {
    let mut h = hash;
    h ^= h >> 21;
    h ^= h << 35;
    h ^= h >> 4;
    h.wrapping_add(value)
}

/// The hash of a page of dialogs, over everything a client shows of each one: the peer, its
/// top message, watermarks and counts, and its settings. Two pages hash alike only when they
/// list the same dialogs in the same state (up to the rare collision).
pub fn dialogs_hash(dialogs: &[Dialog]) -> i64 {
    let mut h = 0u64;
    for d in dialogs {
        let notify = d.notify_settings.unwrap_or_default();
        let draft = d.draft.as_ref().map_or((0, 0), |d| (d.date, d.pts));
        let flags = u64::from(d.pinned)
            | u64::from(d.unread_mark) << 1
            | (d.folder_id as u64) << 2
            | notify.show_previews.map_or(0, |v| 2 + u64::from(v)) << 8
            | notify.silent.map_or(0, |v| 2 + u64::from(v)) << 10;
        for value in [
            d.peer_user() as u64,
            d.top_message_id as u64,
            d.top_message_date as u64,
            d.read_inbox_max_id as u64,
            d.read_outbox_max_id as u64,
            d.delivered_outbox_max_id as u64,
            d.unread_count as u64,
            flags,
            notify.mute_until as u64,
            draft.0 as u64,
            draft.1 as u64,
            d.unread_reactions_count as u64,
        ] {
            h = step(h, value);
        }
    }
    // 0 asks for the page whatever it is: never the hash of one.
    match h as i64 {
        0 => 1,
        h => h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::v1::Peer;

    fn dialog(peer: i64, top: i64) -> Dialog {
        Dialog {
            peer: Some(Peer::user(peer)),
            top_message_id: top,
            top_message_date: 1000 + top,
            ..Dialog::default()
        }
    }

    #[test]
    fn filters_take_the_order_asked_for_and_keep_the_others_after_it() {
        let table: [(&[i32], &[i32], &[i32]); 4] = [
            (&[2, 3, 4], &[4, 2, 3], &[4, 2, 3]),
            (&[2, 3, 4], &[4], &[4, 2, 3]),
            (&[2, 3], &[9, 3, 3], &[3, 2]),
            (&[], &[2], &[]),
        ];
        for (current, order, expected) in table {
            assert_eq!(
                filter_order(current, order),
                expected,
                "{current:?} by {order:?}"
            );
        }
    }

    #[test]
    fn the_hash_changes_with_whatever_a_page_shows() {
        let page = vec![dialog(2, 5), dialog(3, 4)];
        let base = dialogs_hash(&page);
        assert_eq!(base, dialogs_hash(&page.clone()), "stable");
        type Change = Box<dyn Fn(&mut Vec<Dialog>)>;
        let changes: Vec<(&str, Change)> = vec![
            ("order", Box::new(|p| p.swap(0, 1))),
            ("a new top message", Box::new(|p| p[0].top_message_id = 6)),
            ("unread count", Box::new(|p| p[1].unread_count = 1)),
            (
                "unread reactions",
                Box::new(|p| p[1].unread_reactions_count = 1),
            ),
            ("pinned", Box::new(|p| p[0].pinned = true)),
            ("unread mark", Box::new(|p| p[0].unread_mark = true)),
            ("folder", Box::new(|p| p[0].folder_id = 1)),
            (
                "muted",
                Box::new(|p| {
                    p[0].notify_settings = Some(crate::types::v1::PeerNotifySettings {
                        mute_until: 5,
                        ..Default::default()
                    })
                }),
            ),
            (
                "a draft",
                Box::new(|p| {
                    p[1].draft = Some(crate::types::v1::DraftMessage {
                        date: 9,
                        pts: 3,
                        ..Default::default()
                    })
                }),
            ),
            (
                "one dialog less",
                Box::new(|p| {
                    p.pop();
                }),
            ),
        ];
        for (name, change) in changes {
            let mut changed = page.clone();
            change(&mut changed);
            assert_ne!(dialogs_hash(&changed), base, "{name}");
        }
        assert_ne!(dialogs_hash(&[]), 0, "0 is never a page's hash");
    }
}
