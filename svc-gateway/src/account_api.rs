//! The client's Account service: the caller's own presence (`UpdateStatus`).

use std::sync::Arc;

use oxigram_proto::api::v1::{UpdateStatusRequest, UpdateStatusResponse, account_server::Account};
use tonic::{Request, Response, Status};

use crate::Gateway;

pub struct AccountApi(pub Arc<Gateway>);

#[tonic::async_trait]
impl Account for AccountApi {
    async fn update_status(
        &self,
        request: Request<UpdateStatusRequest>,
    ) -> Result<Response<UpdateStatusResponse>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        self.0
            .presence
            .set_offline(me.user_id, request.offline)
            .await;
        Ok(Response::new(UpdateStatusResponse {}))
    }
}
