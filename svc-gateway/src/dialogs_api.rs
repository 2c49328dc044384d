//! The client's Dialogs service: dialogs from svc-dialogs, their top messages from
//! svc-messages, and the peers from this gateway's accounts.

use std::sync::Arc;

use oxigram_errors::forward;
use oxigram_proto::{
    api::v1::{Dialog, DialogsSlice, GetDialogsRequest, dialogs_server::Dialogs},
    dialogs::v1 as dialogs_svc,
    messages::v1 as messages_svc,
};
use tonic::{Request, Response, Status};

use crate::{Gateway, auth::caller};

pub struct DialogsApi(pub Arc<Gateway>);

#[tonic::async_trait]
impl Dialogs for DialogsApi {
    async fn get_dialogs(
        &self,
        request: Request<GetDialogsRequest>,
    ) -> Result<Response<DialogsSlice>, Status> {
        let owner_id = caller(&self.0, request.metadata()).await?.user()?;
        let r = request.into_inner();
        let page = self
            .0
            .dialogs
            .clone()
            .get_dialogs(dialogs_svc::GetDialogsRequest {
                owner_id,
                offset_date: r.offset_date,
                offset_id: r.offset_id,
                offset_peer_user_id: r.offset_peer_user_id,
                limit: r.limit,
            })
            .await
            .map_err(forward)?
            .into_inner();
        let top_ids: Vec<i64> = page.dialogs.iter().map(|d| d.top_message_id).collect();
        let messages = if top_ids.is_empty() {
            vec![]
        } else {
            self.0
                .messages
                .clone()
                .get_messages(messages_svc::GetMessagesRequest {
                    owner_id,
                    ids: top_ids,
                })
                .await
                .map_err(forward)?
                .into_inner()
                .messages
        };
        let peers: Vec<i64> = page.dialogs.iter().map(|d| d.peer_user_id).collect();
        let users = self.0.users_of(&messages, &peers).await?;
        let dialogs = page
            .dialogs
            .into_iter()
            .map(|d| Dialog {
                peer_user_id: d.peer_user_id,
                top_message_id: d.top_message_id,
                top_message_date: d.top_message_date,
                read_inbox_max_id: d.read_inbox_max_id,
                read_outbox_max_id: d.read_outbox_max_id,
                unread_count: d.unread_count,
                delivered_outbox_max_id: d.delivered_outbox_max_id,
            })
            .collect();
        Ok(Response::new(DialogsSlice {
            dialogs,
            messages,
            users,
        }))
    }
}
