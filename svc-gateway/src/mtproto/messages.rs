//! The `messages.*` calls of the MTProto door, each answered by the gRPC door's own handler
//! (`MessagesApi`, `DialogsApi`): the TL request becomes the gRPC request, the answer becomes
//! the TL answer, every pts shifted as `updates` explains.

use std::sync::Arc;

use oxigram_mtproto::session::RpcError;
use oxigram_proto::api::v1::{
    dialogs_server::Dialogs, messages_server::Messages, updates_server::Updates,
};
use oxigram_proto::types::v1 as ox;
use oxigram_tl::{Identifiable, Serializable, enums, functions, types};

use super::api::{read, request, signed_in};
use super::convert::{self, int};
use super::entities;
use super::media;
use super::updates::{self, tl_pts};
use crate::{Gateway, dialogs_api::DialogsApi, messages_api::MessagesApi, updates_api::UpdatesApi};

fn status(status: tonic::Status) -> RpcError {
    convert::rpc_error(&status)
}

/// Answers a `messages.*` call, or `None` for a method this file does not map.
pub async fn answer(
    gateway: &Arc<Gateway>,
    uploads: &media::Uploads,
    header: &str,
    id: u32,
    query: &[u8],
) -> Option<Result<Vec<u8>, RpcError>> {
    let answer = match id {
        functions::messages::SendMessage::CONSTRUCTOR_ID => {
            send_message(gateway, header, query).await
        }
        functions::messages::GetHistory::CONSTRUCTOR_ID => {
            get_history(gateway, header, query).await
        }
        functions::messages::GetMessages::CONSTRUCTOR_ID => {
            get_messages(gateway, header, query).await
        }
        functions::messages::ReadHistory::CONSTRUCTOR_ID => {
            read_history(gateway, header, query).await
        }
        functions::messages::EditMessage::CONSTRUCTOR_ID => {
            edit_message(gateway, uploads, header, query).await
        }
        functions::messages::DeleteMessages::CONSTRUCTOR_ID => {
            delete_messages(gateway, header, query).await
        }
        functions::messages::ForwardMessages::CONSTRUCTOR_ID => {
            forward_messages(gateway, header, query).await
        }
        functions::messages::ReadMessageContents::CONSTRUCTOR_ID => {
            read_message_contents(gateway, header, query).await
        }
        functions::messages::Search::CONSTRUCTOR_ID => search(gateway, header, query).await,
        functions::messages::SendReaction::CONSTRUCTOR_ID => {
            send_reaction(gateway, header, query).await
        }
        functions::messages::ReadReactions::CONSTRUCTOR_ID => {
            read_reactions(gateway, header, query).await
        }
        functions::messages::GetDialogs::CONSTRUCTOR_ID => {
            get_dialogs(gateway, header, query).await
        }
        functions::messages::GetPeerDialogs::CONSTRUCTOR_ID => {
            get_peer_dialogs(gateway, header, query).await
        }
        _ => return None,
    };
    Some(answer)
}

/// A request's formatting as oxigram's (the caller is looked up only when there is any: a
/// mention of herself names her).
pub(super) async fn formatting(
    gateway: &Gateway,
    header: &str,
    tl: Option<&[enums::MessageEntity]>,
) -> Result<Vec<ox::MessageEntity>, RpcError> {
    match tl {
        None | Some([]) => Ok(Vec::new()),
        Some(tl) => entities::from_tl(Some(tl), signed_in(gateway, header).await?),
    }
}

pub(super) fn reply_to_msg_id(reply_to: Option<&enums::InputReplyTo>) -> i64 {
    match reply_to {
        Some(enums::InputReplyTo::Message(m)) => i64::from(m.reply_to_msg_id),
        _ => 0,
    }
}

async fn send_message(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let send: functions::messages::SendMessage = read(query)?;
    let entities = formatting(gateway, header, send.entities.as_deref()).await?;
    let sent = MessagesApi(gateway.clone())
        .send_message(request(
            header,
            ox::SendMessageRequest {
                peer: Some(convert::input_peer(&send.peer)?),
                random_id: send.random_id,
                text: send.message,
                reply_to_msg_id: reply_to_msg_id(send.reply_to.as_ref()),
                entities,
                silent: send.silent,
                noforwards: send.noforwards,
                ..Default::default()
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    let message = sent.message.unwrap_or_default();
    Ok(
        enums::Updates::UpdateShortSentMessage(types::UpdateShortSentMessage {
            out: true,
            id: int(message.id),
            pts: tl_pts(sent.pts),
            pts_count: sent.pts_count,
            date: int(message.date),
            media: None,
            entities: None,
            ttl_period: None,
        })
        .to_bytes(),
    )
}

/// `messages.messages` of a list and the users it names.
fn messages_of(messages: &[ox::Message], users: &[ox::User], viewer: i64) -> Vec<u8> {
    enums::messages::Messages::Messages(types::messages::Messages {
        messages: messages.iter().map(convert::message).collect(),
        topics: Vec::new(),
        chats: Vec::new(),
        users: convert::users(users, viewer),
    })
    .to_bytes()
}

async fn get_history(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let wanted: functions::messages::GetHistory = read(query)?;
    let me = signed_in(gateway, header).await?;
    let slice = MessagesApi(gateway.clone())
        .get_history(request(
            header,
            ox::GetHistoryRequest {
                peer: Some(convert::input_peer(&wanted.peer)?),
                offset_id: i64::from(wanted.offset_id),
                limit: wanted.limit,
                offset_date: i64::from(wanted.offset_date),
                add_offset: wanted.add_offset,
                max_id: i64::from(wanted.max_id),
                min_id: i64::from(wanted.min_id),
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    Ok(messages_of(&slice.messages, &slice.users, me))
}

async fn get_messages(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let wanted: functions::messages::GetMessages = read(query)?;
    let me = signed_in(gateway, header).await?;
    // Only plain ids name a message of a private chat; any other kind finds nothing.
    let ids: Vec<Option<i32>> = wanted
        .id
        .iter()
        .map(|m| match m {
            enums::InputMessage::Id(m) => Some(m.id),
            _ => None,
        })
        .collect();
    let slice = MessagesApi(gateway.clone())
        .get_messages(request(
            header,
            ox::GetMessagesRequest {
                ids: ids.iter().flatten().map(|id| i64::from(*id)).collect(),
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    // In the order asked, a message that is not (or no longer) there as messageEmpty.
    let messages = ids
        .iter()
        .map(|id| {
            let found = id.and_then(|id| slice.messages.iter().find(|m| m.id == i64::from(id)));
            found.map_or_else(|| convert::message_empty(id.unwrap_or(0)), convert::message)
        })
        .collect();
    Ok(
        enums::messages::Messages::Messages(types::messages::Messages {
            messages,
            topics: Vec::new(),
            chats: Vec::new(),
            users: convert::users(&slice.users, me),
        })
        .to_bytes(),
    )
}

fn affected(pts: i32, pts_count: i32) -> Vec<u8> {
    enums::messages::AffectedMessages::Messages(types::messages::AffectedMessages {
        pts: tl_pts(pts),
        pts_count,
    })
    .to_bytes()
}

async fn read_history(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let read_up_to: functions::messages::ReadHistory = read(query)?;
    let done = MessagesApi(gateway.clone())
        .read_history(request(
            header,
            ox::ReadHistoryRequest {
                peer: Some(convert::input_peer(&read_up_to.peer)?),
                max_id: i64::from(read_up_to.max_id),
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    Ok(affected(done.pts, done.pts_count))
}

async fn delete_messages(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let delete: functions::messages::DeleteMessages = read(query)?;
    let done = MessagesApi(gateway.clone())
        .delete_messages(request(
            header,
            ox::DeleteMessagesRequest {
                ids: delete.id.iter().map(|id| i64::from(*id)).collect(),
                revoke: delete.revoke,
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    Ok(affected(done.pts, done.pts_count))
}

async fn read_message_contents(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let read: functions::messages::ReadMessageContents = read(query)?;
    let done = MessagesApi(gateway.clone())
        .read_message_contents(request(
            header,
            ox::ReadMessageContentsRequest {
                ids: read.id.iter().map(|id| i64::from(*id)).collect(),
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    Ok(affected(done.pts, done.pts_count))
}

/// messages.sendReaction: the first emoji of `reaction` replaces the caller's reaction, none
/// removes it. The answer is Telegram's: `updateMessageReactions` with the message's reactions
/// now, and the pts the call moved (a reaction is logged, Telegram's update carries no pts).
async fn send_reaction(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let wanted: functions::messages::SendReaction = read(query)?;
    let me = signed_in(gateway, header).await?;
    let reaction = match wanted.reaction.as_deref().unwrap_or_default().first() {
        None | Some(enums::Reaction::Empty) => String::new(),
        Some(enums::Reaction::Emoji(e)) => e.emoticon.clone(),
        Some(_) => return Err(RpcError::new(400, "REACTION_INVALID")),
    };
    let peer = convert::input_peer(&wanted.peer)?;
    let sent = MessagesApi(gateway.clone())
        .send_reaction(request(
            header,
            ox::SendReactionRequest {
                peer: Some(peer),
                msg_id: i64::from(wanted.msg_id),
                reaction,
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    let found = MessagesApi(gateway.clone())
        .get_messages(request(
            header,
            ox::GetMessagesRequest {
                ids: vec![i64::from(wanted.msg_id)],
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    let message = found
        .messages
        .into_iter()
        .next()
        .ok_or_else(|| RpcError::new(400, "MESSAGE_ID_INVALID"))?;
    let mut updates = vec![enums::Update::MessageReactions(
        types::UpdateMessageReactions {
            peer: convert::peer(message.peer_id.as_ref()),
            msg_id: wanted.msg_id,
            top_msg_id: None,
            saved_peer_id: None,
            reactions: convert::reactions(&message.reactions),
        },
    )];
    if sent.pts_count > 0 {
        updates.push(updates::pts_update(&ox::PtsUpdate {
            pts: sent.pts,
            pts_count: sent.pts_count,
            ..Default::default()
        }));
    }
    own_updates(gateway, me, updates, &[message]).await
}

/// messages.readReactions: the dialog's unread reactions are read; affectedHistory (offset 0:
/// one call reads them all).
async fn read_reactions(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let wanted: functions::messages::ReadReactions = read(query)?;
    let peer = convert::input_peer(&wanted.peer)?;
    let done = MessagesApi(gateway.clone())
        .read_reactions(request(
            header,
            ox::ReadReactionsRequest { peer: Some(peer) },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    Ok(
        enums::messages::AffectedHistory::History(types::messages::AffectedHistory {
            pts: tl_pts(done.pts),
            pts_count: done.pts_count,
            offset: 0,
        })
        .to_bytes(),
    )
}

/// `updates` carrying the caller's own updates of a call and the users they name.
pub(super) async fn own_updates(
    gateway: &Gateway,
    me: i64,
    updates: Vec<enums::Update>,
    messages: &[ox::Message],
) -> Result<Vec<u8>, RpcError> {
    let mut ids: Vec<i64> = messages
        .iter()
        .flat_map(|m| {
            let peer = match m.peer_id.as_ref().and_then(|p| p.kind.as_ref()) {
                Some(ox::peer::Kind::UserId(id)) => *id,
                None => m.from_user_id,
            };
            [Some(peer), m.fwd_from.as_ref().map(|f| f.from_user_id)]
        })
        .flatten()
        .filter(|id| *id != 0)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let users = gateway.users_for(me, &ids).await.map_err(status)?;
    Ok(enums::Updates::Updates(types::Updates {
        updates,
        users: convert::users(&users, me),
        chats: Vec::new(),
        date: int(crate::transient::now_ms() / 1000),
        seq: 0,
    })
    .to_bytes())
}

/// The text and formatting of the caller's message `id` now (`MESSAGE_ID_INVALID` if she has
/// none by that id).
async fn caption_of(
    gateway: &Arc<Gateway>,
    header: &str,
    id: i32,
) -> Result<(String, Vec<ox::MessageEntity>), RpcError> {
    let found = MessagesApi(gateway.clone())
        .get_messages(request(
            header,
            ox::GetMessagesRequest {
                ids: vec![i64::from(id)],
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    found
        .messages
        .into_iter()
        .find(|m| m.id == i64::from(id))
        .map(|m| (m.text, m.entities))
        .ok_or_else(|| RpcError::new(400, "MESSAGE_ID_INVALID"))
}

async fn edit_message(
    gateway: &Arc<Gateway>,
    uploads: &media::Uploads,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let edit: functions::messages::EditMessage = read(query)?;
    let me = signed_in(gateway, header).await?;
    // A new file replaces the message's (then the text is its caption), as on the gRPC door.
    let new_media = match &edit.media {
        Some(new) => Some(media::input_media(gateway, uploads, header, me, new).await?),
        None => None,
    };
    let (text, entities) = match edit.message {
        Some(text) => (text, entities::from_tl(edit.entities.as_deref(), me)?),
        // Telegram keeps the caption when only the file changes; oxigram's edit replaces both.
        None if new_media.is_some() => caption_of(gateway, header, edit.id).await?,
        None => (
            String::new(),
            entities::from_tl(edit.entities.as_deref(), me)?,
        ),
    };
    let edited = MessagesApi(gateway.clone())
        .edit_message(request(
            header,
            ox::EditMessageRequest {
                peer: Some(convert::input_peer(&edit.peer)?),
                id: i64::from(edit.id),
                text,
                entities,
                new_media,
                ..Default::default()
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    let message = edited.message.unwrap_or_default();
    let update = enums::Update::EditMessage(types::UpdateEditMessage {
        message: convert::message(&message),
        pts: tl_pts(edited.pts),
        pts_count: edited.pts_count,
    });
    own_updates(gateway, me, vec![update], &[message]).await
}

async fn forward_messages(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let forward: functions::messages::ForwardMessages = read(query)?;
    let me = signed_in(gateway, header).await?;
    let forwarded = MessagesApi(gateway.clone())
        .forward_messages(request(
            header,
            ox::ForwardMessagesRequest {
                from_peer: Some(convert::input_peer(&forward.from_peer)?),
                ids: forward.id.iter().map(|id| i64::from(*id)).collect(),
                random_ids: forward.random_id.clone(),
                to_peer: Some(convert::input_peer(&forward.to_peer)?),
                drop_author: forward.drop_author,
                silent: forward.silent,
                noforwards: forward.noforwards,
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    sent_updates(gateway, me, forwarded.sent).await
}

/// `updates` answering a call that sent messages (forwards, media): each new message with the
/// random_id it was sent under (how clients match them), then the message itself.
pub(super) async fn sent_updates(
    gateway: &Gateway,
    me: i64,
    sent: Vec<ox::SendMessageResponse>,
) -> Result<Vec<u8>, RpcError> {
    let mut updates = Vec::with_capacity(sent.len() * 2);
    let mut messages = Vec::with_capacity(sent.len());
    for sent in sent {
        let message = sent.message.unwrap_or_default();
        updates.push(enums::Update::MessageId(types::UpdateMessageId {
            id: int(message.id),
            random_id: sent.random_id,
        }));
        updates.push(enums::Update::NewMessage(types::UpdateNewMessage {
            message: convert::message(&message),
            pts: tl_pts(sent.pts),
            pts_count: sent.pts_count,
        }));
        messages.push(message);
    }
    own_updates(gateway, me, updates, &messages).await
}

async fn search(gateway: &Arc<Gateway>, header: &str, query: &[u8]) -> Result<Vec<u8>, RpcError> {
    let wanted: functions::messages::Search = read(query)?;
    let me = signed_in(gateway, header).await?;
    let peer = match &wanted.peer {
        enums::InputPeer::Empty => None,
        peer => Some(convert::input_peer(peer)?),
    };
    let from_user_id = match &wanted.from_id {
        None => 0,
        Some(enums::InputPeer::PeerSelf) => me,
        Some(enums::InputPeer::User(user)) => user.user_id,
        Some(_) => return Err(RpcError::new(400, "PEER_ID_INVALID")),
    };
    let found = MessagesApi(gateway.clone())
        .search(request(
            header,
            ox::SearchRequest {
                peer,
                q: wanted.q,
                min_date: i64::from(wanted.min_date),
                max_date: i64::from(wanted.max_date),
                from_user_id,
                offset_id: i64::from(wanted.offset_id),
                limit: wanted.limit,
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    Ok(messages_of(&found.messages, &found.users, me))
}

/// The oxigram peer a dialog page continues after.
fn offset_peer(peer: &enums::InputPeer, me: i64) -> Option<ox::Peer> {
    let user_id = match peer {
        enums::InputPeer::PeerSelf => me,
        enums::InputPeer::User(user) => user.user_id,
        _ => return None,
    };
    Some(ox::Peer {
        kind: Some(ox::peer::Kind::UserId(user_id)),
    })
}

async fn get_dialogs(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let wanted: functions::messages::GetDialogs = read(query)?;
    let me = signed_in(gateway, header).await?;
    let limit = wanted.limit;
    let page = DialogsApi(gateway.clone())
        .get_dialogs(request(
            header,
            ox::GetDialogsRequest {
                offset_date: i64::from(wanted.offset_date),
                offset_id: i64::from(wanted.offset_id),
                offset_peer: offset_peer(&wanted.offset_peer, me),
                limit,
                folder_id: wanted.folder_id.unwrap_or(0),
                hash: wanted.hash,
                ..Default::default()
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    if page.not_modified {
        return Ok(
            enums::messages::Dialogs::NotModified(types::messages::DialogsNotModified {
                count: page.count,
            })
            .to_bytes(),
        );
    }
    let dialogs: Vec<enums::Dialog> = page.dialogs.iter().map(convert::dialog).collect();
    let messages = page.messages.iter().map(convert::message).collect();
    let users = convert::users(&page.users, me);
    // A full page may have more after it: a slice, so that clients ask for the next one.
    let full = limit > 0 && dialogs.len() >= usize::try_from(limit).unwrap_or(usize::MAX);
    Ok(if full {
        enums::messages::Dialogs::Slice(types::messages::DialogsSlice {
            count: page.count,
            dialogs,
            messages,
            chats: Vec::new(),
            users,
        })
    } else {
        enums::messages::Dialogs::Dialogs(types::messages::Dialogs {
            dialogs,
            messages,
            chats: Vec::new(),
            users,
        })
    }
    .to_bytes())
}

async fn get_peer_dialogs(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let wanted: functions::messages::GetPeerDialogs = read(query)?;
    let me = signed_in(gateway, header).await?;
    let peers = wanted
        .peers
        .iter()
        .map(|p| match p {
            enums::InputDialogPeer::Peer(p) => convert::input_peer(&p.peer),
            _ => Err(RpcError::new(400, "PEER_ID_INVALID")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let page = DialogsApi(gateway.clone())
        .get_peer_dialogs(request(header, ox::GetPeerDialogsRequest { peers })?)
        .await
        .map_err(status)?
        .into_inner();
    let state = UpdatesApi(gateway.clone())
        .get_state(request(header, oxigram_proto::api::v1::GetStateRequest {})?)
        .await
        .map_err(status)?
        .into_inner();
    Ok(
        enums::messages::PeerDialogs::Dialogs(types::messages::PeerDialogs {
            dialogs: page.dialogs.iter().map(convert::dialog).collect(),
            messages: page.messages.iter().map(convert::message).collect(),
            chats: Vec::new(),
            users: convert::users(&page.users, me),
            state: enums::updates::State::State(updates::state(Some(&state))),
        })
        .to_bytes(),
    )
}
