//! The client's Messages service: the sender is always the caller's user; peers are checked
//! against the accounts this gateway owns before svc-messages is called.

use std::sync::Arc;

use oxigram_errors::{Error, ErrorCode, forward};
use oxigram_proto::{
    api::v1::{
        AffectedMessages, BlockRequest, BlockResponse, Blocked, GetBlockedRequest,
        GetHistoryRequest, GetMessagesRequest, GetOutboxReadDateRequest, MessagesSlice,
        OutboxReadDate, ReadHistoryRequest, ReceivedMessagesRequest, ReceivedMessagesResponse,
        SendMessageRequest, SendMessageResponse, messages_server::Messages,
    },
    dialogs::v1 as dialogs_svc,
    messages::v1 as messages_svc,
    types::v1::{Message, User},
    updates::v1 as updates_svc,
};
use tonic::{Request, Response, Status};

use crate::{Gateway, accounts, auth::caller};

pub struct MessagesApi(pub Arc<Gateway>);

/// Most ids a client's GetMessages may name.
pub const MAX_CLIENT_MESSAGE_IDS: usize = 200;

impl Gateway {
    /// The users named by these messages (senders and peers).
    pub async fn users_of(&self, messages: &[Message], also: &[i64]) -> Result<Vec<User>, Status> {
        let mut ids: Vec<i64> = messages
            .iter()
            .flat_map(|m| [m.from_user_id, m.peer_user_id])
            .chain(also.iter().copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Ok(accounts::users_by_ids(&self.pool, &ids)
            .await
            .map_err(Error::from)?)
    }

    /// `PEER_ID_INVALID` unless `peer` is an existing user.
    pub async fn check_peer(&self, peer: i64) -> Result<(), Status> {
        if peer > 0 && self.caches.user_exists(peer) {
            return Ok(());
        }
        if peer > 0
            && !accounts::users_by_ids(&self.pool, &[peer])
                .await
                .map_err(Error::from)?
                .is_empty()
        {
            self.caches.remember_user(peer);
            return Ok(());
        }
        Err(Error::new(ErrorCode::PeerIdInvalid, "no such user").into())
    }
}

#[tonic::async_trait]
impl Messages for MessagesApi {
    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let me = caller(&self.0, request.metadata()).await?;
        let sender_id = me.user()?;
        let r = request.into_inner();
        self.0.check_peer(r.peer_user_id).await?;
        if let Err(wait) = self.0.send_limiter.check(sender_id).await {
            return Err(Error::new(ErrorCode::FloodWait(wait), "too many messages").into());
        }
        let sent = self
            .0
            .messages
            .clone()
            .send_message(messages_svc::SendMessageRequest {
                sender_id,
                peer_user_id: r.peer_user_id,
                random_id: r.random_id,
                text: r.text,
                reply_to_msg_id: r.reply_to_msg_id,
                silent: r.silent,
                noforwards: r.noforwards,
                auth_key_id: me.auth_key_id,
            })
            .await
            .map_err(forward)?
            .into_inner();
        Ok(Response::new(SendMessageResponse {
            message: sent.message,
            pts: sent.pts,
            pts_count: sent.pts_count,
        }))
    }

    async fn get_history(
        &self,
        request: Request<GetHistoryRequest>,
    ) -> Result<Response<MessagesSlice>, Status> {
        let owner_id = caller(&self.0, request.metadata()).await?.user()?;
        let r = request.into_inner();
        self.0.check_peer(r.peer_user_id).await?;
        let messages = self
            .0
            .messages
            .clone()
            .get_history(messages_svc::GetHistoryRequest {
                owner_id,
                peer_user_id: r.peer_user_id,
                offset_id: r.offset_id,
                limit: r.limit,
                offset_date: r.offset_date,
                add_offset: r.add_offset,
                max_id: r.max_id,
                min_id: r.min_id,
            })
            .await
            .map_err(forward)?
            .into_inner()
            .messages;
        let users = self.0.users_of(&messages, &[r.peer_user_id]).await?;
        Ok(Response::new(MessagesSlice { messages, users }))
    }

    async fn get_messages(
        &self,
        request: Request<GetMessagesRequest>,
    ) -> Result<Response<MessagesSlice>, Status> {
        let owner_id = caller(&self.0, request.metadata()).await?.user()?;
        let ids = request.into_inner().ids;
        if ids.len() > MAX_CLIENT_MESSAGE_IDS {
            return Err(Error::new(
                ErrorCode::LimitInvalid,
                format!("at most {MAX_CLIENT_MESSAGE_IDS} ids"),
            )
            .into());
        }
        let messages = self
            .0
            .messages
            .clone()
            .get_messages(messages_svc::GetMessagesRequest { owner_id, ids })
            .await
            .map_err(forward)?
            .into_inner()
            .messages;
        let users = self.0.users_of(&messages, &[]).await?;
        Ok(Response::new(MessagesSlice { messages, users }))
    }

    async fn read_history(
        &self,
        request: Request<ReadHistoryRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let me = caller(&self.0, request.metadata()).await?;
        let owner_id = me.user()?;
        let r = request.into_inner();
        self.0.check_peer(r.peer_user_id).await?;
        // svc-dialogs counts the unread messages as of the reader's update log and logs the
        // read right after what it counted.
        let read = self
            .0
            .dialogs
            .clone()
            .read_history(dialogs_svc::ReadHistoryRequest {
                owner_id,
                peer_user_id: r.peer_user_id,
                max_id: r.max_id,
                auth_key_id: me.auth_key_id,
            })
            .await
            .map_err(forward)?
            .into_inner();
        if read.moved {
            return Ok(Response::new(AffectedMessages {
                pts: read.pts,
                pts_count: read.pts_count,
            }));
        }
        // A repeat: nothing moved, no new pts; the current state.
        let state = self
            .0
            .updates
            .clone()
            .get_state(updates_svc::GetStateRequest { user_id: owner_id })
            .await
            .map_err(forward)?
            .into_inner();
        Ok(Response::new(AffectedMessages {
            pts: state.pts,
            pts_count: 0,
        }))
    }

    async fn get_outbox_read_date(
        &self,
        request: Request<GetOutboxReadDateRequest>,
    ) -> Result<Response<OutboxReadDate>, Status> {
        let owner_id = caller(&self.0, request.metadata()).await?.user()?;
        let r = request.into_inner();
        // Only our own outgoing message of this dialog has a read date.
        let mine = self
            .0
            .messages
            .clone()
            .get_messages(messages_svc::GetMessagesRequest {
                owner_id,
                ids: vec![r.msg_id],
            })
            .await
            .map_err(forward)?
            .into_inner()
            .messages;
        if !mine
            .iter()
            .any(|m| m.out && m.peer_user_id == r.peer_user_id)
        {
            return Err(Error::new(
                ErrorCode::MessageIdInvalid,
                "not an outgoing message of this chat",
            )
            .into());
        }
        let date = self
            .0
            .dialogs
            .clone()
            .get_outbox_read_date(dialogs_svc::GetOutboxReadDateRequest {
                owner_id,
                peer_user_id: r.peer_user_id,
                msg_id: r.msg_id,
            })
            .await
            .map_err(forward)?
            .into_inner()
            .date;
        Ok(Response::new(OutboxReadDate { date }))
    }

    async fn received_messages(
        &self,
        request: Request<ReceivedMessagesRequest>,
    ) -> Result<Response<ReceivedMessagesResponse>, Status> {
        let me = caller(&self.0, request.metadata()).await?;
        let owner_id = me.user()?;
        let max_id = self
            .0
            .dialogs
            .clone()
            .received_messages(dialogs_svc::ReceivedMessagesRequest {
                owner_id,
                auth_key_id: me.auth_key_id,
                max_id: request.into_inner().max_id,
            })
            .await
            .map_err(forward)?
            .into_inner()
            .max_id;
        Ok(Response::new(ReceivedMessagesResponse { max_id }))
    }

    async fn block(
        &self,
        request: Request<BlockRequest>,
    ) -> Result<Response<BlockResponse>, Status> {
        let owner_id = caller(&self.0, request.metadata()).await?.user()?;
        let user_id = request.into_inner().user_id;
        self.0.check_peer(user_id).await?;
        self.0
            .messages
            .clone()
            .block(messages_svc::BlockRequest { owner_id, user_id })
            .await
            .map_err(forward)?;
        Ok(Response::new(BlockResponse {}))
    }

    async fn unblock(
        &self,
        request: Request<BlockRequest>,
    ) -> Result<Response<BlockResponse>, Status> {
        let owner_id = caller(&self.0, request.metadata()).await?.user()?;
        let user_id = request.into_inner().user_id;
        self.0
            .messages
            .clone()
            .unblock(messages_svc::BlockRequest { owner_id, user_id })
            .await
            .map_err(forward)?;
        Ok(Response::new(BlockResponse {}))
    }

    async fn get_blocked(
        &self,
        request: Request<GetBlockedRequest>,
    ) -> Result<Response<Blocked>, Status> {
        let owner_id = caller(&self.0, request.metadata()).await?.user()?;
        let r = request.into_inner();
        let ids = self
            .0
            .messages
            .clone()
            .get_blocked(messages_svc::GetBlockedRequest {
                owner_id,
                offset_user_id: r.offset_user_id,
                limit: r.limit,
            })
            .await
            .map_err(forward)?
            .into_inner()
            .user_ids;
        let users = accounts::users_by_ids(&self.0.pool, &ids)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(Blocked { users }))
    }
}
