//! The client's Messages service: the sender is always the caller's user; peers are checked
//! against the accounts this gateway owns before svc-messages is called.

use std::sync::Arc;

use oxigram_errors::{Error, ErrorCode, forward};
use oxigram_proto::{
    api::v1::{
        GetHistoryRequest, GetMessagesRequest, MessagesSlice, SendMessageRequest,
        SendMessageResponse, messages_server::Messages,
    },
    internal::v1 as internal,
    types::v1::{Message, User},
};
use tonic::{Request, Response, Status};

use crate::{Gateway, accounts, auth::caller};

pub struct MessagesApi(pub Arc<Gateway>);

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
        if peer > 0
            && !accounts::users_by_ids(&self.pool, &[peer])
                .await
                .map_err(Error::from)?
                .is_empty()
        {
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
        let sent = self
            .0
            .messages
            .clone()
            .send_message(internal::SendMessageRequest {
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
            .get_history(internal::GetHistoryRequest {
                owner_id,
                peer_user_id: r.peer_user_id,
                offset_id: r.offset_id,
                limit: r.limit,
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
        let messages = self
            .0
            .messages
            .clone()
            .get_messages(internal::GetMessagesRequest {
                owner_id,
                ids: request.into_inner().ids,
            })
            .await
            .map_err(forward)?
            .into_inner()
            .messages;
        let users = self.0.users_of(&messages, &[]).await?;
        Ok(Response::new(MessagesSlice { messages, users }))
    }
}
