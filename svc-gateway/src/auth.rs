//! Authentication by auth key, and the Auth service (create key, login codes, sign in/up, log out).
//!
//! Every call carries `x-oxigram-auth-key: <id>:<secret hex>`. The acting user is the one the
//! key is bound to; no request field can name another.

use std::sync::Arc;

use oxigram_errors::{Error, ErrorCode, check_text};
use oxigram_limiter::Rule;
use oxigram_proto::api::v1::{
    Authorization, AuthorizationInfo, Authorizations, CreateAuthKeyRequest, CreateAuthKeyResponse,
    GetAuthorizationsRequest, LogOutRequest, LogOutResponse, ResetAuthorizationRequest,
    ResetAuthorizationResponse, ResetAuthorizationsRequest, ResetAuthorizationsResponse,
    SendCodeRequest, SendCodeResponse, SignInRequest, SignUpRequest, auth_server::Auth,
};
use rand::Rng;
use sha2::{Digest, Sha256};
use tonic::{Request, Response, Status, metadata::MetadataMap};

use crate::{
    Gateway,
    accounts::{self, CodeCheck},
    cache::CachedKey,
};

pub use oxigram_proto::AUTH_KEY_HEADER;
/// How long a login code stays valid.
const LOGIN_CODE_TTL_SECS: i64 = 300;

/// Who is calling.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub auth_key_id: i64,
    /// `None` while the key is signed in to no account.
    pub user_id: Option<i64>,
}

impl Caller {
    /// The signed-in user, or `AUTH_KEY_UNREGISTERED`.
    pub fn user(&self) -> Result<i64, Status> {
        self.user_id
            .ok_or_else(|| Error::new(ErrorCode::AuthKeyUnregistered, "sign in first").into())
    }
}

/// A caller whose key is signed in to an account: who every RPC but the sign-in ones acts for.
#[derive(Debug, Clone, Copy)]
pub struct SignedIn {
    pub user_id: i64,
    pub auth_key_id: i64,
}

impl Gateway {
    /// The signed-in caller of `request` (`AUTH_KEY_INVALID`, `AUTH_KEY_UNREGISTERED`
    /// otherwise) and the request's body.
    pub async fn signed_in<T>(&self, request: Request<T>) -> Result<(SignedIn, T), Status> {
        let me = caller(self, request.metadata()).await?;
        let user_id = me.user()?;
        self.refuse_banned(user_id)?;
        let me = SignedIn {
            user_id,
            auth_key_id: me.auth_key_id,
        };
        // Every signed-in call keeps its user online for a while.
        self.presence.touch(user_id);
        Ok((me, request.into_inner()))
    }

    /// `USER_DEACTIVATED_BAN` when `user_id` is on the operator's ban list.
    pub fn refuse_banned(&self, user_id: i64) -> Result<(), Status> {
        if self.rules.is_banned(user_id) {
            return Err(Error::new(ErrorCode::UserDeactivatedBan, "this account is banned").into());
        }
        Ok(())
    }
}

fn hash_secret(secret: &[u8]) -> Vec<u8> {
    Sha256::digest(secret).to_vec()
}

/// Resolves the caller from the request's auth key.
pub async fn caller(gateway: &Gateway, metadata: &MetadataMap) -> Result<Caller, Status> {
    let invalid = || {
        Status::from(Error::new(
            ErrorCode::AuthKeyInvalid,
            "missing or unknown auth key",
        ))
    };
    let value = metadata
        .get(AUTH_KEY_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(invalid)?;
    let (id, secret) = value.split_once(':').ok_or_else(invalid)?;
    let id: i64 = id.parse().map_err(|_| invalid())?;
    let secret = hex::decode(secret).map_err(|_| invalid())?;
    let key = match gateway.caches.auth_key(id) {
        Some(key) => key,
        None => {
            let (secret_hash, user_id) = accounts::auth_key(&gateway.pool, id)
                .await
                .map_err(Error::from)?
                .ok_or_else(invalid)?;
            let key = CachedKey {
                secret_hash,
                user_id,
            };
            gateway.caches.put_auth_key(id, key.clone());
            key
        }
    };
    let (stored_hash, user_id) = (key.secret_hash, key.user_id);
    if stored_hash != hash_secret(&secret) {
        return Err(invalid());
    }
    Ok(Caller {
        auth_key_id: id,
        user_id,
    })
}

fn valid_phone(phone: &str) -> Result<String, Status> {
    check_text("phone", phone)?;
    let digits: String = phone.strip_prefix('+').unwrap_or(phone).to_owned();
    if (5..=15).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_digit()) {
        Ok(digits)
    } else {
        Err(Error::new(
            ErrorCode::PhoneNumberInvalid,
            "a phone number is 5 to 15 digits",
        )
        .into())
    }
}

/// The phone of a sign-in or sign-up, its digits, once the fields naming its login code are
/// text.
fn login_phone(phone: &str, phone_code_hash: &str, code: &str) -> Result<String, Status> {
    let phone = valid_phone(phone)?;
    check_text("phone_code_hash", phone_code_hash)?;
    check_text("code", code)?;
    Ok(phone)
}

/// Where login codes go. In development they are written to the log.
pub trait CodeSender: Send + Sync {
    fn send(&self, phone: &str, code: &str);
}

/// The development code sender: the code appears in the gateway's log.
pub struct LogCodeSender;

impl CodeSender for LogCodeSender {
    fn send(&self, phone: &str, code: &str) {
        tracing::info!(phone, code, "login code (development code sender)");
    }
}

pub struct AuthApi(pub Arc<Gateway>);

impl AuthApi {
    /// One login call with `phone` from the caller's key, counted against the key's login
    /// calls and against `per_phone` (codes sent, or sign-in attempts).
    async fn limit_login(
        &self,
        me: &Caller,
        per_phone: &Rule,
        phone: &str,
        what: &str,
    ) -> Result<(), Status> {
        let limits = &self.0.limits;
        limits
            .check(
                &limits.login_per_key,
                me.auth_key_id,
                "too many login calls",
            )
            .await?;
        limits.check(per_phone, phone, what).await
    }

    /// Binds the caller's key to `user_id`. Switching accounts on one key ends the key's open
    /// streams, so nothing of the old account reaches the new session.
    async fn bind(&self, me: Caller, user_id: i64) -> Result<(), Status> {
        self.0.refuse_banned(user_id)?;
        accounts::bind_auth_key(&self.0.pool, me.auth_key_id, Some(user_id))
            .await
            .map_err(Error::from)?;
        self.0.caches.forget_auth_key(me.auth_key_id);
        if me.user_id.is_some_and(|old| old != user_id) {
            self.0.hub.disconnect_device(me.auth_key_id);
        }
        Ok(())
    }

    async fn verify_code(&self, phone: &str, hash: &str, code: &str) -> Result<(), Status> {
        if hash.is_empty() {
            return Err(
                Error::new(ErrorCode::PhoneCodeHashEmpty, "phone_code_hash is empty").into(),
            );
        }
        match accounts::check_login_code(&self.0.pool, hash, phone, code)
            .await
            .map_err(Error::from)?
        {
            CodeCheck::Valid => Ok(()),
            CodeCheck::Invalid => Err(Error::new(ErrorCode::PhoneCodeInvalid, "wrong code").into()),
            CodeCheck::Expired => {
                Err(Error::new(ErrorCode::PhoneCodeExpired, "request a new code").into())
            }
        }
    }
}

#[tonic::async_trait]
impl Auth for AuthApi {
    async fn create_auth_key(
        &self,
        request: Request<CreateAuthKeyRequest>,
    ) -> Result<Response<CreateAuthKeyResponse>, Status> {
        let device_model = request.into_inner().device_model;
        check_text("device_model", &device_model)?;
        let device_model: String = device_model.chars().take(64).collect();
        loop {
            let (id, secret) = {
                let mut rng = rand::rng();
                let id: i64 = rng.random_range(1..i64::MAX);
                let secret: [u8; 32] = rng.random();
                (id, secret)
            };
            if accounts::insert_auth_key(&self.0.pool, id, &hash_secret(&secret), &device_model)
                .await
                .map_err(Error::from)?
            {
                return Ok(Response::new(CreateAuthKeyResponse {
                    auth_key_id: id,
                    secret: hex::encode(secret),
                }));
            }
        }
    }

    async fn send_code(
        &self,
        request: Request<SendCodeRequest>,
    ) -> Result<Response<SendCodeResponse>, Status> {
        let me = caller(&self.0, request.metadata()).await?;
        let phone = valid_phone(&request.get_ref().phone)?;
        let limits = &self.0.limits;
        self.limit_login(
            &me,
            &limits.send_code_per_phone,
            &phone,
            "too many codes for this phone",
        )
        .await?;
        let (code, hash) = {
            let mut rng = rand::rng();
            let code = match &self.0.config.gateway.fixed_login_code {
                Some(fixed) => fixed.clone(),
                None => format!("{:05}", rng.random_range(0..100_000)),
            };
            (code, hex::encode(rng.random::<[u8; 16]>()))
        };
        accounts::insert_login_code(&self.0.pool, &hash, &phone, &code, LOGIN_CODE_TTL_SECS)
            .await
            .map_err(Error::from)?;
        self.0.code_sender.send(&phone, &code);
        Ok(Response::new(SendCodeResponse {
            phone_code_hash: hash,
        }))
    }

    async fn sign_in(
        &self,
        request: Request<SignInRequest>,
    ) -> Result<Response<Authorization>, Status> {
        let me = caller(&self.0, request.metadata()).await?;
        let r = request.into_inner();
        let phone = login_phone(&r.phone, &r.phone_code_hash, &r.code)?;
        self.limit_login(
            &me,
            &self.0.limits.sign_in_per_phone,
            &phone,
            "too many attempts for this phone",
        )
        .await?;
        // An unknown phone is told before the code is used up: the client signs up with it.
        let user = accounts::user_by_phone(&self.0.pool, &phone)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| {
                Status::from(Error::new(
                    ErrorCode::PhoneNumberUnoccupied,
                    "sign up first",
                ))
            })?;
        self.verify_code(&phone, &r.phone_code_hash, &r.code)
            .await?;
        self.bind(me, user.id).await?;
        Ok(Response::new(Authorization {
            user: Some(user.own_view()),
        }))
    }

    async fn sign_up(
        &self,
        request: Request<SignUpRequest>,
    ) -> Result<Response<Authorization>, Status> {
        let me = caller(&self.0, request.metadata()).await?;
        let r = request.into_inner();
        let phone = login_phone(&r.phone, &r.phone_code_hash, &r.code)?;
        self.limit_login(
            &me,
            &self.0.limits.sign_in_per_phone,
            &phone,
            "too many attempts for this phone",
        )
        .await?;
        let first_name = crate::profile::first_name("first_name", &r.first_name)?;
        self.verify_code(&phone, &r.phone_code_hash, &r.code)
            .await?;
        let user = accounts::insert_user(&self.0.pool, &phone, &first_name)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| {
                Status::from(Error::new(
                    ErrorCode::PhoneNumberOccupied,
                    "sign in instead",
                ))
            })?;
        self.bind(me, user.id).await?;
        Ok(Response::new(Authorization {
            user: Some(user.own_view()),
        }))
    }

    async fn log_out(
        &self,
        request: Request<LogOutRequest>,
    ) -> Result<Response<LogOutResponse>, Status> {
        let (me, _) = self.0.signed_in(request).await?;
        accounts::bind_auth_key(&self.0.pool, me.auth_key_id, None)
            .await
            .map_err(Error::from)?;
        self.0.signed_out(me.auth_key_id);
        Ok(Response::new(LogOutResponse {}))
    }

    async fn get_authorizations(
        &self,
        request: Request<GetAuthorizationsRequest>,
    ) -> Result<Response<Authorizations>, Status> {
        let (me, _) = self.0.signed_in(request).await?;
        let rows = accounts::authorizations(&self.0.pool, me.user_id)
            .await
            .map_err(Error::from)?;
        let authorizations = rows
            .into_iter()
            .map(|a| AuthorizationInfo {
                current: a.auth_key_id == me.auth_key_id,
                auth_key_id: a.auth_key_id,
                device_model: a.device_model,
                date_created: a.created_at,
                date_bound: a.bound_at,
            })
            .collect();
        Ok(Response::new(Authorizations { authorizations }))
    }

    async fn reset_authorization(
        &self,
        request: Request<ResetAuthorizationRequest>,
    ) -> Result<Response<ResetAuthorizationResponse>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let target = request.auth_key_id;
        if target == me.auth_key_id {
            return Err(
                Error::new(ErrorCode::HashInvalid, "log out to end the current device").into(),
            );
        }
        if !accounts::unbind_if_owned(&self.0.pool, target, me.user_id)
            .await
            .map_err(Error::from)?
        {
            return Err(
                Error::new(ErrorCode::HashInvalid, "no such device of this account").into(),
            );
        }
        self.0.signed_out(target);
        Ok(Response::new(ResetAuthorizationResponse {}))
    }

    async fn reset_authorizations(
        &self,
        request: Request<ResetAuthorizationsRequest>,
    ) -> Result<Response<ResetAuthorizationsResponse>, Status> {
        let (me, _) = self.0.signed_in(request).await?;
        // One statement, so a device cannot stay signed in by racing a list and its resets.
        let ended = accounts::unbind_others(&self.0.pool, me.user_id, me.auth_key_id)
            .await
            .map_err(Error::from)?;
        for key in &ended {
            self.0.signed_out(*key);
        }
        Ok(Response::new(ResetAuthorizationsResponse {
            signed_out: i32::try_from(ended.len()).unwrap_or(i32::MAX),
        }))
    }
}

impl Gateway {
    /// A key was signed out (logged out or reset): it is read from Postgres again at its next
    /// call, and its streams on this instance end now (those on other instances at their next
    /// check of the streams' keys).
    fn signed_out(&self, auth_key_id: i64) {
        self.caches.forget_auth_key(auth_key_id);
        self.hub.disconnect_device(auth_key_id);
    }
}
