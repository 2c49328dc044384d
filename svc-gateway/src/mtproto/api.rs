//! The API calls of the MTProto door, each answered by the gRPC API's own handler: the call is
//! read as its TL function, made a gRPC request carrying the key's `x-oxigram-auth-key`, and
//! the answer translated back. A method not mapped here answers `rpc_error` 400
//! `METHOD_NOT_SUPPORTED`, on a connection that stays open.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use oxigram_mtproto::session::{Call, RpcError};
use oxigram_proto::api::v1::{
    self as api, auth_server::Auth, messages_server::Messages, updates_server::Updates,
    users_server::Users,
};
use oxigram_tl::{Cursor, Deserializable, Identifiable, Serializable, enums, functions, types};
use tonic::Request;
use tonic::metadata::MetadataValue;

use super::convert;
use crate::{
    AUTH_KEY_HEADER, Gateway, auth::AuthApi, messages_api::MessagesApi, updates_api::UpdatesApi,
    users_api::UsersApi,
};

/// A gRPC request as the key's own call.
fn request<T>(header: &str, body: T) -> Result<Request<T>, RpcError> {
    let mut request = Request::new(body);
    let value =
        MetadataValue::try_from(header).map_err(|_| RpcError::new(401, "AUTH_KEY_INVALID"))?;
    request.metadata_mut().insert(AUTH_KEY_HEADER, value);
    Ok(request)
}

fn read<T: Deserializable>(query: &[u8]) -> Result<T, RpcError> {
    T::deserialize(&mut Cursor::from_slice(&query[4..]))
        .map_err(|_| RpcError::new(400, "INPUT_CONSTRUCTOR_INVALID"))
}

fn unix_now() -> i32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i32)
        .unwrap_or(0)
}

/// Answers one API call (constructor id first) with a serialised TL object.
///
/// `codes` keeps the login code of a sign-in that found no account, by its phone_code_hash:
/// Telegram's `auth.signUp` does not repeat the code, oxigram's SignUp checks it.
pub async fn answer(
    gateway: &Arc<Gateway>,
    codes: &Mutex<HashMap<String, String>>,
    header: &str,
    call: &Call,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let Some(id) = oxigram_tl::constructor_id(query) else {
        return Err(RpcError::new(400, "INPUT_METHOD_INVALID"));
    };
    let status = |s: tonic::Status| convert::rpc_error(&s);
    match id {
        functions::help::GetConfig::CONSTRUCTOR_ID => {
            let listen = gateway.config.mtproto.listen;
            let host = listen
                .map(|a| a.ip().to_string())
                .unwrap_or_else(|| "127.0.0.1".into());
            let port = listen.map(|a| i32::from(a.port())).unwrap_or(0);
            Ok(convert::config(unix_now(), &host, port).to_bytes())
        }
        functions::help::GetNearestDc::CONSTRUCTOR_ID => {
            Ok(enums::NearestDc::Dc(types::NearestDc {
                country: String::new(),
                this_dc: 1,
                nearest_dc: 1,
            })
            .to_bytes())
        }
        functions::auth::SendCode::CONSTRUCTOR_ID => {
            let sent: functions::auth::SendCode = read(query)?;
            let answer = AuthApi(gateway.clone())
                .send_code(request(
                    header,
                    api::SendCodeRequest {
                        phone: sent.phone_number,
                    },
                )?)
                .await
                .map_err(status)?
                .into_inner();
            Ok(enums::auth::SentCode::Code(types::auth::SentCode {
                r#type: enums::auth::SentCodeType::App(types::auth::SentCodeTypeApp { length: 5 }),
                phone_code_hash: answer.phone_code_hash,
                next_type: None,
                timeout: None,
            })
            .to_bytes())
        }
        functions::auth::SignIn::CONSTRUCTOR_ID => {
            let sign_in: functions::auth::SignIn = read(query)?;
            let (hash, code) = (
                sign_in.phone_code_hash.clone(),
                sign_in.phone_code.clone().unwrap_or_default(),
            );
            let signed = AuthApi(gateway.clone())
                .sign_in(request(
                    header,
                    api::SignInRequest {
                        phone: sign_in.phone_number,
                        phone_code_hash: sign_in.phone_code_hash,
                        code: sign_in.phone_code.unwrap_or_default(),
                    },
                )?)
                .await;
            match signed {
                Ok(authorization) => Ok(authorization_of(authorization.into_inner())),
                // Telegram answers an unknown phone with "sign up required", not an error.
                Err(error)
                    if oxigram_errors::code_of(&error).as_deref()
                        == Some("PHONE_NUMBER_UNOCCUPIED") =>
                {
                    if let Ok(mut codes) = codes.lock() {
                        codes.insert(hash, code);
                    }
                    Ok(enums::auth::Authorization::SignUpRequired(
                        types::auth::AuthorizationSignUpRequired {
                            terms_of_service: None,
                        },
                    )
                    .to_bytes())
                }
                Err(error) => Err(status(error)),
            }
        }
        functions::auth::SignUp::CONSTRUCTOR_ID => {
            let sign_up: functions::auth::SignUp = read(query)?;
            let code = codes
                .lock()
                .ok()
                .and_then(|mut codes| codes.remove(&sign_up.phone_code_hash))
                .ok_or_else(|| RpcError::new(400, "PHONE_CODE_EMPTY"))?;
            let authorization = AuthApi(gateway.clone())
                .sign_up(request(
                    header,
                    api::SignUpRequest {
                        phone: sign_up.phone_number,
                        phone_code_hash: sign_up.phone_code_hash,
                        code,
                        first_name: sign_up.first_name,
                    },
                )?)
                .await
                .map_err(status)?
                .into_inner();
            Ok(authorization_of(authorization))
        }
        functions::auth::LogOut::CONSTRUCTOR_ID => {
            AuthApi(gateway.clone())
                .log_out(request(header, api::LogOutRequest {})?)
                .await
                .map_err(status)?;
            Ok(enums::auth::LoggedOut::Out(types::auth::LoggedOut {
                future_auth_token: None,
            })
            .to_bytes())
        }
        functions::users::GetUsers::CONSTRUCTOR_ID => {
            let wanted: functions::users::GetUsers = read(query)?;
            let me = UsersApi(gateway.clone())
                .get_me(request(header, api::GetMeRequest {})?)
                .await
                .map_err(status)?
                .into_inner();
            let users: Vec<enums::User> = wanted
                .id
                .iter()
                .map(|input| match input {
                    enums::InputUser::UserSelf => convert::user(&me, true),
                    enums::InputUser::User(u) if u.user_id == me.id => convert::user(&me, true),
                    other => enums::User::Empty(types::UserEmpty {
                        id: match other {
                            enums::InputUser::User(u) => u.user_id,
                            _ => 0,
                        },
                    }),
                })
                .collect();
            Ok(users.to_bytes())
        }
        functions::updates::GetState::CONSTRUCTOR_ID => {
            let state = UpdatesApi(gateway.clone())
                .get_state(request(header, api::GetStateRequest {})?)
                .await
                .map_err(status)?
                .into_inner();
            Ok(enums::updates::State::State(types::updates::State {
                pts: state.pts,
                qts: 0,
                date: i32::try_from(state.date).unwrap_or(i32::MAX),
                seq: 0,
                unread_count: 0,
            })
            .to_bytes())
        }
        functions::messages::SendMessage::CONSTRUCTOR_ID => {
            let send: functions::messages::SendMessage = read(query)?;
            let sent = MessagesApi(gateway.clone())
                .send_message(request(
                    header,
                    oxigram_proto::types::v1::SendMessageRequest {
                        peer: Some(convert::input_peer(&send.peer)?),
                        random_id: send.random_id,
                        text: send.message,
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
                    id: convert::int(message.id),
                    pts: sent.pts,
                    pts_count: sent.pts_count,
                    date: convert::int(message.date),
                    media: None,
                    entities: None,
                    ttl_period: None,
                })
                .to_bytes(),
            )
        }
        functions::messages::GetHistory::CONSTRUCTOR_ID => {
            let wanted: functions::messages::GetHistory = read(query)?;
            let slice = MessagesApi(gateway.clone())
                .get_history(request(
                    header,
                    oxigram_proto::types::v1::GetHistoryRequest {
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
            Ok(
                enums::messages::Messages::Messages(types::messages::Messages {
                    messages: slice.messages.iter().map(convert::message).collect(),
                    topics: Vec::new(),
                    chats: Vec::new(),
                    users: slice
                        .users
                        .iter()
                        .map(|u| convert::user(u, false))
                        .collect(),
                })
                .to_bytes(),
            )
        }
        _ => {
            tracing::debug!(method = oxigram_tl::name_for_id(id), layer = ?call.layer, "MTProto method not supported");
            Err(RpcError::new(400, "METHOD_NOT_SUPPORTED"))
        }
    }
}

fn authorization_of(authorization: api::Authorization) -> Vec<u8> {
    let user = authorization.user.unwrap_or_default();
    enums::auth::Authorization::Authorization(types::auth::Authorization {
        setup_password_required: false,
        otherwise_relogin_days: None,
        tmp_sessions: None,
        future_auth_token: None,
        user: convert::user(&user, true),
    })
    .to_bytes()
}
