//! The client's Messages service: the sender is always the caller's user; peers are checked
//! against the accounts this gateway owns before svc-messages is called.

use std::sync::Arc;

use oxigram_errors::{Error, ErrorCode, forward, status};
use oxigram_proto::{
    api::v1::{
        AffectedHistory, AffectedMessages, BlockRequest, BlockResponse, Blocked,
        DeleteHistoryRequest, DeleteMessagesRequest, EditMessageRequest, EditMessageResponse,
        ForwardMessagesRequest, ForwardMessagesResponse, FoundMessages, GetBlockedRequest,
        GetHistoryRequest, GetMessagesRequest, GetOutboxReadDateRequest, MessagesSlice,
        OutboxReadDate, ReadHistoryRequest, ReadMessageContentsRequest, ReadReactionsRequest,
        ReceivedMessagesRequest, ReceivedMessagesResponse, SearchRequest, SendMediaRequest,
        SendMediaResponse, SendMessageRequest, SendMessageResponse, SendReactionRequest,
        SetTypingRequest, SetTypingResponse, messages_server::Messages,
    },
    dialogs::v1 as dialogs_svc,
    messages::v1 as messages_svc,
    require_peer,
    types::v1::{InputPeer, Message, User},
    updates::v1 as updates_svc,
};
use tonic::{Request, Response, Status};

use crate::{Gateway, accounts, acting::Acting};

pub struct MessagesApi(pub Arc<Gateway>);

/// Most media one album holds.
pub const MAX_ALBUM: usize = 10;

/// Whether a media send of `items` items may be made: checked before any file is resolved (or,
/// on the MTProto door, any upload completed) for a call refused anyway.
pub fn album_size(items: usize) -> Result<(), Status> {
    if items == 0 {
        return Err(status(ErrorCode::MediaEmpty, "no media to send"));
    }
    if items > MAX_ALBUM {
        return Err(status(
            ErrorCode::MultiMediaTooLong,
            "an album has at most 10 media",
        ));
    }
    Ok(())
}

/// The grouped_id of an album: made of its sender and its first item's key, so that a retry
/// of the same call makes the same album (and each item the same request).
fn album_id(sender_id: i64, first_random_id: i64) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(b"album")
        .chain_update(sender_id.to_le_bytes())
        .chain_update(first_random_id.to_le_bytes())
        .finalize();
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    // Positive and never 0 (0 is "not an album").
    (i64::from_le_bytes(id) & i64::MAX).max(1)
}

/// The ids of the users these messages name (senders, peers, and a forward's original sender
/// and the dialog it was saved from), and `also`; repeats left in.
pub fn user_ids_of(messages: &[Message], also: &[i64]) -> Vec<i64> {
    let forwarded = messages.iter().filter_map(|m| m.fwd_from).flat_map(|f| {
        [
            Some(f.from_user_id),
            f.saved_from_peer.and_then(|p| p.user_id()),
        ]
        .into_iter()
        .flatten()
    });
    messages
        .iter()
        .flat_map(|m| [m.from_user_id, m.peer_user()])
        .chain(forwarded)
        .chain(also.iter().copied())
        .collect()
}

/// Most ids a client's GetMessages may name.
pub const MAX_CLIENT_MESSAGE_IDS: usize = 200;

impl Gateway {
    /// The users named by these messages (senders, peers, and a forward's original sender and
    /// the dialog it was saved from), and `also`, as `viewer` sees them.
    pub async fn users_of(
        &self,
        viewer: i64,
        messages: &[Message],
        also: &[i64],
    ) -> Result<Vec<User>, Status> {
        self.users_for(viewer, &user_ids_of(messages, also)).await
    }

    /// The messages of `owner_id`'s box with these ids (those she has), from svc-messages.
    pub async fn messages_by_ids(
        &self,
        owner_id: i64,
        request: GetMessagesRequest,
    ) -> Result<Vec<Message>, Status> {
        if request.ids.is_empty() {
            return Ok(vec![]);
        }
        let request = messages_svc::GetMessagesRequest {
            owner_id,
            request: Some(request),
        };
        let list = self.messages.clone().get_messages(request).await;
        Ok(list.map_err(forward)?.into_inner().messages)
    }

    /// The caller's current pts: the answer of a call that moved nothing.
    async fn current_pts(&self, user_id: i64) -> Result<i32, Status> {
        let state = self
            .updates
            .clone()
            .get_state(updates_svc::GetStateRequest { user_id })
            .await
            .map_err(forward)?;
        Ok(state.into_inner().pts)
    }

    /// What a call that may move the caller's pts answers: its own pts when it moved them,
    /// else (nothing changed, or the log has not answered yet) the current pts, pts_count 0.
    async fn affected(
        &self,
        user_id: i64,
        moved: AffectedMessages,
    ) -> Result<Response<AffectedMessages>, Status> {
        if moved.pts_count > 0 {
            return Ok(Response::new(moved));
        }
        Ok(Response::new(AffectedMessages {
            pts: self.current_pts(user_id).await?,
            pts_count: 0,
        }))
    }

    /// `PEER_ID_INVALID` unless `peer` is an existing user.
    pub async fn check_peer(&self, peer: i64) -> Result<(), Status> {
        if peer > 0 && self.caches.user_exists(peer) {
            return Ok(());
        }
        if peer > 0
            && !accounts::profiles_by_ids(&self.pool, &[peer])
                .await
                .map_err(Error::from)?
                .is_empty()
        {
            self.caches.remember_user(peer);
            return Ok(());
        }
        Err(Error::new(ErrorCode::PeerIdInvalid, "no such user").into())
    }

    /// The user a request's peer names for the caller `me`, when she exists; else
    /// `PEER_ID_INVALID`.
    pub async fn existing_peer(&self, me: i64, peer: Option<&InputPeer>) -> Result<i64, Status> {
        let peer = require_peer(peer, me)?;
        self.check_peer(peer).await?;
        Ok(peer)
    }
}

impl MessagesApi {
    /// SendMessage itself; the trait's method counts and times it.
    async fn send(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        // A message's file is only ever what svc-media resolved of the sender's own upload.
        if request.media.is_some() || request.grouped_id != 0 {
            return Err(status(
                ErrorCode::MediaInvalid,
                "send a file with SendMedia",
            ));
        }
        self.0
            .existing_peer(me.user_id, request.peer.as_ref())
            .await?;
        let limits = &self.0.limits;
        limits
            .check(&limits.send, me.user_id, "too many messages")
            .await?;
        let request = messages_svc::SendMessageRequest::acting(me, request);
        let sent = self.0.messages.clone().send_message(request).await;
        sent.map_err(forward)
    }
}

#[tonic::async_trait]
impl Messages for MessagesApi {
    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let started = std::time::Instant::now();
        let answer = self.send(request).await;
        crate::metrics::send(&answer, started.elapsed());
        answer
    }

    async fn send_media(
        &self,
        request: Request<SendMediaRequest>,
    ) -> Result<Response<SendMediaResponse>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        album_size(r.multi_media.len())?;
        self.0.existing_peer(me.user_id, r.peer.as_ref()).await?;
        let limits = &self.0.limits;
        limits
            .check(&limits.send, me.user_id, "too many messages")
            .await?;
        let grouped_id = match r.multi_media.len() {
            1 => 0,
            _ => album_id(me.user_id, r.multi_media[0].random_id),
        };
        let mut sends = Vec::with_capacity(r.multi_media.len());
        for item in r.multi_media {
            let media = self.0.resolve_media(me.user_id, item.media).await?;
            sends.push(SendMessageRequest {
                peer: r.peer,
                random_id: item.random_id,
                text: item.caption,
                entities: item.entities,
                reply_to_msg_id: r.reply_to_msg_id,
                silent: r.silent,
                noforwards: r.noforwards,
                media: Some(media),
                grouped_id,
                ..SendMessageRequest::default()
            });
        }
        let request = messages_svc::SendMediaRequest {
            sender_id: me.user_id,
            auth_key_id: me.auth_key_id,
            sends,
        };
        let sent = self.0.messages.clone().send_media(request).await;
        sent.map_err(forward)
    }

    async fn forward_messages(
        &self,
        request: Request<ForwardMessagesRequest>,
    ) -> Result<Response<ForwardMessagesResponse>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        // The dialog forwarded from needs no check: the caller's boxes are looked up in it.
        let to = oxigram_proto::resolve_peer(request.to_peer.as_ref(), me.user_id);
        self.0.check_peer(to.unwrap_or(0)).await?;
        let limits = &self.0.limits;
        limits
            .check(&limits.send, me.user_id, "too many messages")
            .await?;
        let request = messages_svc::ForwardMessagesRequest::acting(me, request);
        let forwarded = self.0.messages.clone().forward_messages(request).await;
        forwarded.map_err(forward)
    }

    async fn edit_message(
        &self,
        request: Request<EditMessageRequest>,
    ) -> Result<Response<EditMessageResponse>, Status> {
        let (me, mut request) = self.0.signed_in(request).await?;
        if request.media.is_some() {
            return Err(status(
                ErrorCode::MediaInvalid,
                "a new file goes in new_media",
            ));
        }
        self.0
            .existing_peer(me.user_id, request.peer.as_ref())
            .await?;
        if let Some(new_media) = request.new_media.take() {
            request.media = Some(self.0.resolve_media(me.user_id, Some(new_media)).await?);
        }
        let request = messages_svc::EditMessageRequest::acting(me, request);
        let edited = self.0.messages.clone().edit_message(request).await;
        edited.map_err(forward)
    }

    async fn delete_messages(
        &self,
        request: Request<DeleteMessagesRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let request = messages_svc::DeleteMessagesRequest::acting(me, request);
        let deleted = self.0.messages.clone().delete_messages(request).await;
        self.0
            .affected(me.user_id, deleted.map_err(forward)?.into_inner())
            .await
    }

    async fn delete_history(
        &self,
        request: Request<DeleteHistoryRequest>,
    ) -> Result<Response<AffectedHistory>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let peer = oxigram_proto::resolve_peer(request.peer.as_ref(), me.user_id)
            .ok_or_else(|| Error::new(ErrorCode::PeerIdInvalid, "peer names no user"))?;
        self.0.check_peer(peer).await?;
        let request = messages_svc::DeleteHistoryRequest::acting(me, request);
        let deleted = self.0.messages.clone().delete_history(request).await;
        let deleted = deleted.map_err(forward)?.into_inner();
        if deleted.pts_count > 0 {
            return Ok(Response::new(deleted));
        }
        Ok(Response::new(AffectedHistory {
            pts: self.0.current_pts(me.user_id).await?,
            pts_count: 0,
            offset: deleted.offset,
        }))
    }

    async fn get_history(
        &self,
        request: Request<GetHistoryRequest>,
    ) -> Result<Response<MessagesSlice>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let peer = self
            .0
            .existing_peer(me.user_id, request.peer.as_ref())
            .await?;
        let request = messages_svc::GetHistoryRequest::acting(me, request);
        let history = self.0.messages.clone().get_history(request).await;
        let messages = history.map_err(forward)?.into_inner().messages;
        let users = self.0.users_of(me.user_id, &messages, &[peer]).await?;
        Ok(Response::new(MessagesSlice { messages, users }))
    }

    async fn get_messages(
        &self,
        request: Request<GetMessagesRequest>,
    ) -> Result<Response<MessagesSlice>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        if request.ids.len() > MAX_CLIENT_MESSAGE_IDS {
            return Err(Error::new(
                ErrorCode::LimitInvalid,
                format!("at most {MAX_CLIENT_MESSAGE_IDS} ids"),
            )
            .into());
        }
        let messages = self.0.messages_by_ids(me.user_id, request).await?;
        let users = self.0.users_of(me.user_id, &messages, &[]).await?;
        Ok(Response::new(MessagesSlice { messages, users }))
    }

    async fn read_history(
        &self,
        request: Request<ReadHistoryRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        self.0
            .existing_peer(me.user_id, request.peer.as_ref())
            .await?;
        // svc-dialogs counts the unread messages as of the reader's update log and logs the
        // read right after what it counted.
        let request = dialogs_svc::ReadHistoryRequest::acting(me, request);
        let read = self.0.dialogs.clone().read_history(request).await;
        // A repeat moves nothing: the current state.
        self.0
            .affected(me.user_id, read.map_err(forward)?.into_inner())
            .await
    }

    async fn get_outbox_read_date(
        &self,
        request: Request<GetOutboxReadDateRequest>,
    ) -> Result<Response<OutboxReadDate>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let peer = require_peer(request.peer.as_ref(), me.user_id)?;
        // Only our own outgoing message of this dialog has a read date.
        let ids = GetMessagesRequest {
            ids: vec![request.msg_id],
        };
        let mine = self.0.messages_by_ids(me.user_id, ids).await?;
        if !mine.iter().any(|m| m.out && m.peer_user() == peer) {
            return Err(Error::new(
                ErrorCode::MessageIdInvalid,
                "not an outgoing message of this chat",
            )
            .into());
        }
        let request = dialogs_svc::GetOutboxReadDateRequest::acting(me, request);
        let date = self.0.dialogs.clone().get_outbox_read_date(request).await;
        date.map_err(forward)
    }

    async fn received_messages(
        &self,
        request: Request<ReceivedMessagesRequest>,
    ) -> Result<Response<ReceivedMessagesResponse>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let request = dialogs_svc::ReceivedMessagesRequest::acting(me, request);
        let received = self.0.dialogs.clone().received_messages(request).await;
        received.map_err(forward)
    }

    async fn block(
        &self,
        request: Request<BlockRequest>,
    ) -> Result<Response<BlockResponse>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        self.0.check_peer(request.user_id).await?;
        let request = messages_svc::BlockRequest::acting(me, request);
        self.0
            .messages
            .clone()
            .block(request)
            .await
            .map_err(forward)
    }

    async fn unblock(
        &self,
        request: Request<BlockRequest>,
    ) -> Result<Response<BlockResponse>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let request = messages_svc::BlockRequest::acting(me, request);
        self.0
            .messages
            .clone()
            .unblock(request)
            .await
            .map_err(forward)
    }

    async fn get_blocked(
        &self,
        request: Request<GetBlockedRequest>,
    ) -> Result<Response<Blocked>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let request = messages_svc::GetBlockedRequest::acting(me, request);
        let blocked = self.0.messages.clone().get_blocked(request).await;
        let ids = blocked.map_err(forward)?.into_inner().user_ids;
        let users = self.0.users_for(me.user_id, &ids).await?;
        Ok(Response::new(Blocked { users }))
    }

    async fn search(
        &self,
        request: Request<SearchRequest>,
    ) -> Result<Response<FoundMessages>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        // No peer searches every dialog.
        if let Some(peer) = &request.peer {
            self.0.existing_peer(me.user_id, Some(peer)).await?;
        }
        let request = messages_svc::SearchRequest::acting(me, request);
        let found = self.0.messages.clone().search(request).await;
        let found = found.map_err(forward)?.into_inner();
        let users = self.0.users_of(me.user_id, &found.messages, &[]).await?;
        Ok(Response::new(FoundMessages {
            messages: found.messages,
            users,
            next_offset_id: found.next_offset_id,
        }))
    }

    async fn set_typing(
        &self,
        request: Request<SetTypingRequest>,
    ) -> Result<Response<SetTypingResponse>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        self.0
            .set_typing(me, request.peer.as_ref(), request.action.as_ref())
            .await?;
        Ok(Response::new(SetTypingResponse {}))
    }

    async fn read_message_contents(
        &self,
        request: Request<ReadMessageContentsRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let request = messages_svc::ReadMessageContentsRequest::acting(me, request);
        let read = self.0.messages.clone().read_message_contents(request).await;
        self.0
            .affected(me.user_id, read.map_err(forward)?.into_inner())
            .await
    }

    async fn send_reaction(
        &self,
        request: Request<SendReactionRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        self.0
            .existing_peer(me.user_id, request.peer.as_ref())
            .await?;
        let request = messages_svc::SendReactionRequest::acting(me, request);
        let sent = self.0.messages.clone().send_reaction(request).await;
        // The reaction the caller had already: the current state.
        self.0
            .affected(me.user_id, sent.map_err(forward)?.into_inner())
            .await
    }

    async fn read_reactions(
        &self,
        request: Request<ReadReactionsRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        self.0
            .existing_peer(me.user_id, request.peer.as_ref())
            .await?;
        let request = messages_svc::ReadReactionsRequest::acting(me, request);
        let read = self.0.messages.clone().read_reactions(request).await;
        self.0
            .affected(me.user_id, read.map_err(forward)?.into_inner())
            .await
    }
}
