//! The client's Users service.

use std::sync::Arc;

use oxigram_errors::{Error, ErrorCode, check_text};
use oxigram_proto::{
    api::v1::{GetMeRequest, ResolvePhoneRequest, users_server::Users},
    types::v1::User,
};
use tonic::{Request, Response, Status};

use crate::{Gateway, accounts, auth::caller};

pub struct UsersApi(pub Arc<Gateway>);

#[tonic::async_trait]
impl Users for UsersApi {
    async fn get_me(&self, request: Request<GetMeRequest>) -> Result<Response<User>, Status> {
        let me = caller(&self.0, request.metadata()).await?.user()?;
        accounts::users_by_ids(&self.0.pool, &[me])
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
        caller(&self.0, request.metadata()).await?.user()?;
        let phone = request.into_inner().phone;
        check_text("phone", &phone)?;
        let phone = phone.strip_prefix('+').unwrap_or(&phone);
        accounts::user_by_phone(&self.0.pool, phone)
            .await
            .map_err(Error::from)?
            .map(Response::new)
            .ok_or_else(|| Error::new(ErrorCode::PeerIdInvalid, "no user has this phone").into())
    }
}
