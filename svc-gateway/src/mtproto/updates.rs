//! oxigram's update log in Telegram's terms: `updates.getState`, `updates.getDifference` and
//! the updates pushed to connected sessions.
//!
//! A Telegram pts is oxigram's pts plus [`PTS_OFFSET`]: Telegram clients take pts 0 for "no
//! state known" (and then drop pushed updates or refuse to catch up), while a fresh oxigram
//! account is at pts 0. Shifting every pts of this door by one keeps every gap check intact
//! (`pts - pts_count == local pts` holds shifted as it holds unshifted).
//!
//! Every kind of oxigram's log moves the pts, but Telegram has a pts-carrying update only for
//! messages, reads and deletes. A kind without one (dialog pins, drafts, delivery receipts, …)
//! reaches a Telegram client as an empty `updateReadMessagesContents` over the same pts range:
//! it changes nothing on the client but keeps its pts in step, so the next update is no gap.

use std::collections::HashSet;

use oxigram_proto::api::v1::{StreamEvent, stream_event};
use oxigram_proto::types::v1::{self as ox, PtsUpdate, update};
use oxigram_tl::{enums, types};
use tonic::Status;

use super::convert::{self, int};
use crate::Gateway;

pub const PTS_OFFSET: i32 = 1;

/// oxigram's pts as this door reports it.
pub fn tl_pts(pts: i32) -> i32 {
    pts.saturating_add(PTS_OFFSET)
}

/// A pts a client of this door sends, as oxigram's (a client that never had a state sends 0).
pub fn ox_pts(pts: i32) -> i32 {
    pts.saturating_sub(PTS_OFFSET).max(0)
}

/// Telegram's `updates.state` for oxigram's.
pub fn state(state: Option<&ox::UpdatesState>) -> types::updates::State {
    let state = state.cloned().unwrap_or_default();
    types::updates::State {
        pts: tl_pts(state.pts),
        qts: 0,
        date: int(state.date),
        seq: 0,
        unread_count: 0,
    }
}

/// The update that moves a client over the same pts range, without its message when that is
/// carried elsewhere (a difference's `new_messages`) or gone (deleted since).
pub fn pts_update(logged: &PtsUpdate) -> enums::Update {
    let (pts, pts_count) = (tl_pts(logged.pts), logged.pts_count);
    let kind = logged.update.as_ref().and_then(|u| u.kind.as_ref());
    match kind {
        Some(update::Kind::NewMessage(new)) if new.message.is_some() => {
            let message = new.message.as_ref().map(convert::message);
            enums::Update::NewMessage(types::UpdateNewMessage {
                message: message.unwrap_or_else(|| convert::message_empty(0)),
                pts,
                pts_count,
            })
        }
        Some(update::Kind::EditMessage(edit)) if edit.message.is_some() => {
            let message = edit.message.as_ref().map(convert::message);
            enums::Update::EditMessage(types::UpdateEditMessage {
                message: message.unwrap_or_else(|| convert::message_empty(0)),
                pts,
                pts_count,
            })
        }
        Some(update::Kind::DeleteMessages(deleted)) => {
            enums::Update::DeleteMessages(types::UpdateDeleteMessages {
                messages: deleted.ids.iter().map(|id| int(*id)).collect(),
                pts,
                pts_count,
            })
        }
        Some(update::Kind::ReadMessageContents(read)) => {
            enums::Update::ReadMessagesContents(types::UpdateReadMessagesContents {
                messages: read.messages.iter().map(|id| int(*id)).collect(),
                pts,
                pts_count,
                date: Some(int(read.date)),
            })
        }
        Some(update::Kind::ReadHistoryInbox(read)) => {
            enums::Update::ReadHistoryInbox(types::UpdateReadHistoryInbox {
                folder_id: None,
                peer: convert::peer(read.peer.as_ref()),
                top_msg_id: None,
                max_id: int(read.max_id),
                still_unread_count: read.still_unread_count,
                pts,
                pts_count,
            })
        }
        Some(update::Kind::ReadHistoryOutbox(read)) => {
            enums::Update::ReadHistoryOutbox(types::UpdateReadHistoryOutbox {
                peer: convert::peer(read.peer.as_ref()),
                max_id: int(read.max_id),
                pts,
                pts_count,
            })
        }
        _ => pts_filler(pts, pts_count),
    }
}

/// What a client is sent for one logged update: its pts-carrying form, and before it, for a
/// change Telegram's update for carries no pts (new reactions), that update as well, so a
/// client both shows the change and keeps its pts contiguous.
pub fn pts_updates(logged: &PtsUpdate) -> Vec<enums::Update> {
    let reactions = match logged.update.as_ref().and_then(|u| u.kind.as_ref()) {
        Some(update::Kind::MessageReactions(r)) => {
            enums::Update::MessageReactions(types::UpdateMessageReactions {
                peer: convert::peer(r.peer.as_ref()),
                msg_id: int(r.msg_id),
                top_msg_id: None,
                saved_peer_id: None,
                reactions: convert::reactions(&r.reactions),
            })
        }
        _ => return vec![pts_update(logged)],
    };
    vec![reactions, pts_update(logged)]
}

/// Moves a client's pts over a range whose update Telegram has no pts-carrying form of.
fn pts_filler(pts: i32, pts_count: i32) -> enums::Update {
    enums::Update::ReadMessagesContents(types::UpdateReadMessagesContents {
        messages: Vec::new(),
        pts,
        pts_count,
        date: None,
    })
}

/// `updates.getDifference` from a Telegram pts: oxigram's difference (the messages in their
/// current state) with the users they name.
pub async fn difference(
    gateway: &Gateway,
    viewer: i64,
    difference: ox::Difference,
    asked_pts: i32,
) -> Result<enums::updates::Difference, Status> {
    let state = state(difference.state.as_ref());
    if difference.too_long {
        return Ok(enums::updates::Difference::TooLong(
            types::updates::DifferenceTooLong { pts: state.pts },
        ));
    }
    if difference.updates.is_empty() && state.pts <= asked_pts {
        return Ok(enums::updates::Difference::Empty(
            types::updates::DifferenceEmpty {
                date: state.date,
                seq: 0,
            },
        ));
    }
    let new_messages = difference
        .new_messages
        .iter()
        .map(convert::message)
        .collect();
    // New messages come in `new_messages`; everything else (and a new message deleted since,
    // as a filler) in `other_updates`, each over its own pts range.
    let other_updates = difference
        .updates
        .iter()
        .filter(|u| {
            !matches!(
                u.update.as_ref().and_then(|u| u.kind.as_ref()),
                Some(update::Kind::NewMessage(n)) if n.message.is_some()
            )
        })
        .flat_map(|u| match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
            Some(update::Kind::NewMessage(_)) => vec![pts_filler(tl_pts(u.pts), u.pts_count)],
            _ => pts_updates(u),
        })
        .collect();
    // Users of edited messages too (the gateway's difference names only the new ones').
    let mut ids: Vec<i64> = difference.users.iter().map(|u| u.id).collect();
    let known: HashSet<i64> = ids.iter().copied().collect();
    let mut edited_peers: Vec<i64> = difference
        .updates
        .iter()
        .filter_map(|u| match u.update.as_ref()?.kind.as_ref()? {
            update::Kind::EditMessage(e) => e.message.as_ref().map(message_peer),
            _ => None,
        })
        .filter(|id| !known.contains(id))
        .collect();
    edited_peers.sort_unstable();
    edited_peers.dedup();
    let mut users = difference.users;
    if !edited_peers.is_empty() {
        users.extend(gateway.users_for(viewer, &edited_peers).await?);
        ids.extend(edited_peers);
    }
    let users = convert::users(&users, viewer);
    Ok(if difference.is_slice {
        enums::updates::Difference::Slice(types::updates::DifferenceSlice {
            new_messages,
            new_encrypted_messages: Vec::new(),
            other_updates,
            chats: Vec::new(),
            users,
            intermediate_state: enums::updates::State::State(state),
        })
    } else {
        enums::updates::Difference::Difference(types::updates::Difference {
            new_messages,
            new_encrypted_messages: Vec::new(),
            other_updates,
            chats: Vec::new(),
            users,
            state: enums::updates::State::State(state),
        })
    })
}

/// The other party of a message's private chat (the owner herself for Saved Messages).
fn message_peer(message: &ox::Message) -> i64 {
    match message.peer_id.as_ref().and_then(|p| p.kind.as_ref()) {
        Some(ox::peer::Kind::UserId(id)) => *id,
        None => message.from_user_id,
    }
}

/// An event of the session's update stream as what Telegram pushes for it; `None` for what a
/// Telegram client has no use for (a replay's end, profile changes it reads on demand).
///
/// `known` holds the users this session has been sent: a message from a user the client may
/// not know comes as `updates` carrying her, later ones as `updateShortMessage`, as Telegram
/// sends them.
pub async fn pushed(
    gateway: &Gateway,
    viewer: i64,
    event: StreamEvent,
    known: &mut HashSet<i64>,
) -> Result<Option<enums::Updates>, Status> {
    let now = int(crate::transient::now_ms() / 1000);
    let kind = match event.kind {
        Some(kind) => kind,
        None => return Ok(None),
    };
    let logged = match kind {
        stream_event::Kind::Update(logged) => logged,
        stream_event::Kind::DifferenceNeeded(_) => return Ok(Some(enums::Updates::TooLong)),
        stream_event::Kind::UserStatus(status) => {
            let Some(tl_status) = status.status.as_ref().and_then(convert::user_status) else {
                return Ok(None);
            };
            return Ok(Some(short(
                enums::Update::UserStatus(types::UpdateUserStatus {
                    user_id: status.user_id,
                    status: tl_status,
                }),
                now,
            )));
        }
        stream_event::Kind::UserTyping(typing) => {
            return Ok(Some(short(
                enums::Update::UserTyping(types::UpdateUserTyping {
                    user_id: typing.user_id,
                    top_msg_id: None,
                    action: typing_action(typing.action.as_ref()),
                }),
                now,
            )));
        }
        _ => return Ok(None),
    };
    let date = int(logged.date);
    let message = match logged.update.as_ref().and_then(|u| u.kind.as_ref()) {
        Some(update::Kind::NewMessage(new)) => new.message.as_ref(),
        Some(update::Kind::EditMessage(edit)) => edit.message.as_ref(),
        _ => None,
    };
    let Some(message) = message else {
        let mut updates = pts_updates(&logged);
        return Ok(Some(match updates.pop() {
            Some(only) if updates.is_empty() => short(only, date),
            last => enums::Updates::Updates(types::Updates {
                updates: updates.into_iter().chain(last).collect(),
                users: Vec::new(),
                chats: Vec::new(),
                date,
                seq: 0,
            }),
        }));
    };
    let peer = message_peer(message);
    let is_new = matches!(
        logged.update.as_ref().and_then(|u| u.kind.as_ref()),
        Some(update::Kind::NewMessage(_))
    );
    // updateShortMessage has no media: a file comes in full `updates`.
    if is_new && known.contains(&peer) && message.media.is_none() {
        let (fwd_from, reply_to) = match convert::message(message) {
            enums::Message::Message(m) => (m.fwd_from, m.reply_to),
            _ => (None, None),
        };
        return Ok(Some(enums::Updates::UpdateShortMessage(
            types::UpdateShortMessage {
                out: message.out,
                mentioned: false,
                media_unread: message.media_unread,
                silent: message.silent,
                id: int(message.id),
                user_id: peer,
                message: message.text.clone(),
                pts: tl_pts(logged.pts),
                pts_count: logged.pts_count,
                date: int(message.date),
                fwd_from,
                via_bot_id: None,
                reply_to,
                entities: super::entities::to_tl(&message.entities),
                ttl_period: None,
            },
        )));
    }
    let mut wanted = vec![peer];
    if message
        .fwd_from
        .as_ref()
        .is_some_and(|f| f.from_user_id != 0)
    {
        wanted.extend(message.fwd_from.as_ref().map(|f| f.from_user_id));
    }
    wanted.retain(|id| !known.contains(id));
    wanted.sort_unstable();
    wanted.dedup();
    let users = if wanted.is_empty() {
        Vec::new()
    } else {
        gateway.users_for(viewer, &wanted).await?
    };
    known.extend(users.iter().map(|u| u.id));
    Ok(Some(enums::Updates::Updates(types::Updates {
        updates: vec![pts_update(&logged)],
        users: convert::users(&users, viewer),
        chats: Vec::new(),
        date,
        seq: 0,
    })))
}

fn short(update: enums::Update, date: i32) -> enums::Updates {
    enums::Updates::UpdateShort(types::UpdateShort { update, date })
}

/// What a typing peer does, as far as Telegram's actions name it.
fn typing_action(action: Option<&ox::SendMessageAction>) -> enums::SendMessageAction {
    use ox::send_message_action::Kind;
    match action.map(|a| a.kind()) {
        Some(Kind::Cancel) => enums::SendMessageAction::SendMessageCancelAction,
        Some(Kind::RecordAudio) => enums::SendMessageAction::SendMessageRecordAudioAction,
        Some(Kind::RecordVideo) => enums::SendMessageAction::SendMessageRecordVideoAction,
        _ => enums::SendMessageAction::SendMessageTypingAction,
    }
}
