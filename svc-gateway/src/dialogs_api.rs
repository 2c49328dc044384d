//! The client's Dialogs service: dialogs from svc-dialogs, their top messages from
//! svc-messages, and the peers from this gateway's accounts.

use std::sync::Arc;

use oxigram_errors::forward;
use oxigram_proto::{
    api::v1::{DialogsSlice, GetDialogsRequest, GetMessagesRequest, dialogs_server::Dialogs},
    dialogs::v1 as dialogs_svc,
};
use tonic::{Request, Response, Status};

use crate::{Gateway, acting::Acting};

pub struct DialogsApi(pub Arc<Gateway>);

#[tonic::async_trait]
impl Dialogs for DialogsApi {
    async fn get_dialogs(
        &self,
        request: Request<GetDialogsRequest>,
    ) -> Result<Response<DialogsSlice>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let request = dialogs_svc::GetDialogsRequest::acting(me, request);
        let page = self.0.dialogs.clone().get_dialogs(request).await;
        let dialogs = page.map_err(forward)?.into_inner().dialogs;
        let top_ids = GetMessagesRequest {
            ids: dialogs.iter().map(|d| d.top_message_id).collect(),
        };
        let messages = self.0.messages_by_ids(me.user_id, top_ids).await?;
        let peers: Vec<i64> = dialogs.iter().map(|d| d.peer_user()).collect();
        let users = self.0.users_of(me.user_id, &messages, &peers).await?;
        Ok(Response::new(DialogsSlice {
            dialogs,
            messages,
            users,
        }))
    }
}
