//! The client's Users service.

use std::sync::Arc;

use oxigram_errors::{Error, ErrorCode, check_text};
use oxigram_proto::{
    api::v1::{GetMeRequest, ResolvePhoneRequest, users_server::Users},
    types::v1::User,
};
use tonic::{Request, Response, Status};

use crate::{Gateway, accounts};

pub struct UsersApi(pub Arc<Gateway>);

#[tonic::async_trait]
impl Users for UsersApi {
    async fn get_me(&self, request: Request<GetMeRequest>) -> Result<Response<User>, Status> {
        let (me, _) = self.0.signed_in(request).await?;
        accounts::users_by_ids(&self.0.pool, &[me.user_id])
            .await
            .map_err(Error::from)?
            .pop()
            .map(Response::new)
            .ok_or_else(|| Error::new(ErrorCode::AuthKeyUnregistered, "the account is gone").into())
    }

    async fn resolve_phone(
        &self,
        request: Request<ResolvePhoneRequest>,
    ) -> Result<Response<User>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let phone = request.phone;
        check_text("phone", &phone)?;
        let phone = phone.strip_prefix('+').unwrap_or(&phone);
        let user = accounts::user_by_phone(&self.0.pool, phone)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| Error::new(ErrorCode::PeerIdInvalid, "no user has this phone"))?;
        let mut users = [user];
        self.0.with_statuses(me.user_id, &mut users).await;
        let [user] = users;
        Ok(Response::new(user))
    }
}
