//! The API calls of the MTProto door, each answered by the gRPC API's own handler: the call is
//! read as its TL function, made a gRPC request carrying the key's `x-oxigram-auth-key`, and
//! the answer translated back (`messages.*` in `messages`, files in `media`, the update log in
//! `updates`). A method not mapped here answers `rpc_error` 400
//! `METHOD_NOT_SUPPORTED`, on a connection that stays open.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use oxigram_mtproto::session::{Call, RpcError};
use oxigram_proto::api::v1::{
    self as api, auth_server::Auth, contacts_server::Contacts, updates_server::Updates,
    users_server::Users,
};
use oxigram_tl::{Cursor, Deserializable, Identifiable, Serializable, enums, functions, types};
use tonic::Request;
use tonic::metadata::MetadataValue;

use super::{Door, convert, media, messages, updates};
use crate::{
    AUTH_KEY_HEADER, Gateway, auth::AuthApi, contacts_api::ContactsApi, updates_api::UpdatesApi,
    users_api::UsersApi,
};

/// A gRPC request as the key's own call.
pub fn request<T>(header: &str, body: T) -> Result<Request<T>, RpcError> {
    let mut request = Request::new(body);
    let value =
        MetadataValue::try_from(header).map_err(|_| RpcError::new(401, "AUTH_KEY_INVALID"))?;
    request.metadata_mut().insert(AUTH_KEY_HEADER, value);
    Ok(request)
}

/// The call's TL function (its constructor id already matched).
pub fn read<T: Deserializable>(query: &[u8]) -> Result<T, RpcError> {
    let body = query.get(4..).unwrap_or_default();
    T::deserialize(&mut Cursor::from_slice(body))
        .map_err(|_| RpcError::new(400, "INPUT_CONSTRUCTOR_INVALID"))
}

/// The signed-in user of the key (`AUTH_KEY_UNREGISTERED` otherwise).
pub async fn signed_in(gateway: &Gateway, header: &str) -> Result<i64, RpcError> {
    let (me, ()) = gateway
        .signed_in(request(header, ())?)
        .await
        .map_err(|s| convert::rpc_error(&s))?;
    Ok(me.user_id)
}

fn unix_now() -> i32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i32)
        .unwrap_or(0)
}

/// Answers one API call (constructor id first) with a serialised TL object.
///
/// The door's `codes` keep the login code of a sign-in that found no account, by its phone_code_hash:
/// Telegram's `auth.signUp` does not repeat the code, oxigram's SignUp checks it.
pub async fn answer(
    door: &Door,
    header: &str,
    call: &Call,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let (gateway, codes, uploads) = (&door.gateway, &door.codes, &door.uploads);
    let Some(id) = oxigram_tl::constructor_id(query) else {
        return Err(RpcError::new(400, "INPUT_METHOD_INVALID"));
    };
    let status = |s: tonic::Status| convert::rpc_error(&s);
    match id {
        functions::help::GetConfig::CONSTRUCTOR_ID => {
            let at = &door.advertised;
            Ok(convert::config(unix_now(), &at.host, i32::from(at.port)).to_bytes())
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
            // Stock clients probe with the self user before sign-in: a 401 then.
            let me = UsersApi(gateway.clone())
                .get_me(request(header, api::GetMeRequest {})?)
                .await
                .map_err(status)?
                .into_inner();
            let ids: Vec<i64> = wanted
                .id
                .iter()
                .filter_map(|input| match input {
                    enums::InputUser::User(u) if u.user_id != me.id => Some(u.user_id),
                    _ => None,
                })
                .collect();
            let others = gateway.users_for(me.id, &ids).await.map_err(status)?;
            let users: Vec<enums::User> = wanted
                .id
                .iter()
                .map(|input| {
                    let id = match input {
                        enums::InputUser::UserSelf => me.id,
                        enums::InputUser::User(u) => u.user_id,
                        _ => 0,
                    };
                    if id == me.id {
                        return convert::user(&me, true);
                    }
                    others
                        .iter()
                        .find(|u| u.id == id)
                        .map_or(enums::User::Empty(types::UserEmpty { id }), |u| {
                            convert::user(u, false)
                        })
                })
                .collect();
            Ok(users.to_bytes())
        }
        functions::users::GetFullUser::CONSTRUCTOR_ID => {
            let wanted: functions::users::GetFullUser = read(query)?;
            let me = signed_in(gateway, header).await?;
            let id = match wanted.id {
                enums::InputUser::UserSelf => me,
                enums::InputUser::User(u) => u.user_id,
                _ => return Err(RpcError::new(400, "USER_ID_INVALID")),
            };
            let user = gateway
                .user_for(me, id)
                .await
                .map_err(status)?
                .ok_or_else(|| RpcError::new(400, "USER_ID_INVALID"))?;
            let blocked = !gateway
                .blocked_by(id, &[me])
                .await
                .map_err(status)?
                .is_empty();
            Ok(enums::users::UserFull::Full(types::users::UserFull {
                full_user: convert::user_full(&user, blocked),
                chats: Vec::new(),
                users: vec![convert::user(&user, id == me)],
            })
            .to_bytes())
        }
        functions::contacts::ResolveUsername::CONSTRUCTOR_ID => {
            let wanted: functions::contacts::ResolveUsername = read(query)?;
            let me = signed_in(gateway, header).await?;
            let user = UsersApi(gateway.clone())
                .resolve_username(request(
                    header,
                    api::ResolveUsernameRequest {
                        username: wanted.username,
                    },
                )?)
                .await
                .map_err(status)?
                .into_inner();
            Ok(
                enums::contacts::ResolvedPeer::Peer(types::contacts::ResolvedPeer {
                    peer: enums::Peer::User(types::PeerUser { user_id: user.id }),
                    chats: Vec::new(),
                    users: vec![convert::user(&user, user.id == me)],
                })
                .to_bytes(),
            )
        }
        functions::contacts::ImportContacts::CONSTRUCTOR_ID => {
            let wanted: functions::contacts::ImportContacts = read(query)?;
            let me = signed_in(gateway, header).await?;
            let contacts: Vec<types::InputPhoneContact> = wanted
                .contacts
                .into_iter()
                .map(|c| match c {
                    enums::InputContact::InputPhoneContact(c) => c,
                })
                .collect();
            let imported = ContactsApi(gateway.clone())
                .import_contacts(request(
                    header,
                    api::ImportContactsRequest {
                        contacts: contacts
                            .iter()
                            .map(|c| api::InputContact {
                                phone: c.phone.clone(),
                                first_name: c.first_name.clone(),
                                last_name: c.last_name.clone(),
                            })
                            .collect(),
                    },
                )?)
                .await
                .map_err(status)?
                .into_inner();
            // Telegram names each import by the client's own id for the contact.
            let digits =
                |phone: &str| -> String { phone.chars().filter(char::is_ascii_digit).collect() };
            let imported_contacts = imported
                .imported
                .iter()
                .filter_map(|found| {
                    let contact = contacts
                        .iter()
                        .find(|c| digits(&c.phone) == digits(&found.phone))?;
                    Some(enums::ImportedContact::Contact(types::ImportedContact {
                        user_id: found.user_id,
                        client_id: contact.client_id,
                    }))
                })
                .collect();
            Ok(
                enums::contacts::ImportedContacts::Contacts(types::contacts::ImportedContacts {
                    imported: imported_contacts,
                    popular_invites: Vec::new(),
                    retry_contacts: Vec::new(),
                    users: convert::users(&imported.users, me),
                })
                .to_bytes(),
            )
        }
        functions::account::GetAuthorizations::CONSTRUCTOR_ID => {
            let listed = AuthApi(gateway.clone())
                .get_authorizations(request(header, api::GetAuthorizationsRequest {})?)
                .await
                .map_err(status)?
                .into_inner();
            Ok(
                enums::account::Authorizations::Authorizations(types::account::Authorizations {
                    authorization_ttl_days: 365,
                    authorizations: listed
                        .authorizations
                        .iter()
                        .map(convert::authorization)
                        .collect(),
                })
                .to_bytes(),
            )
        }
        functions::account::ResetAuthorization::CONSTRUCTOR_ID => {
            let wanted: functions::account::ResetAuthorization = read(query)?;
            AuthApi(gateway.clone())
                .reset_authorization(request(
                    header,
                    api::ResetAuthorizationRequest {
                        auth_key_id: wanted.hash,
                    },
                )?)
                .await
                .map_err(status)?;
            Ok(true.to_bytes())
        }
        functions::auth::ResetAuthorizations::CONSTRUCTOR_ID => {
            AuthApi(gateway.clone())
                .reset_authorizations(request(header, api::ResetAuthorizationsRequest {})?)
                .await
                .map_err(status)?;
            Ok(true.to_bytes())
        }
        functions::updates::GetState::CONSTRUCTOR_ID => {
            let state = UpdatesApi(gateway.clone())
                .get_state(request(header, api::GetStateRequest {})?)
                .await
                .map_err(status)?
                .into_inner();
            Ok(enums::updates::State::State(updates::state(Some(&state))).to_bytes())
        }
        functions::updates::GetDifference::CONSTRUCTOR_ID => {
            let wanted: functions::updates::GetDifference = read(query)?;
            let me = signed_in(gateway, header).await?;
            // A smaller page when the client asks for one; oxigram's default page otherwise.
            let limit = wanted
                .pts_total_limit
                .filter(|l| (1..=DIFFERENCE_PAGE).contains(l))
                .unwrap_or(0);
            let difference = UpdatesApi(gateway.clone())
                .get_difference(request(
                    header,
                    oxigram_proto::types::v1::GetDifferenceRequest {
                        pts: updates::ox_pts(wanted.pts),
                        limit,
                    },
                )?)
                .await
                .map_err(status)?
                .into_inner();
            let answer = updates::difference(gateway, me, difference, wanted.pts)
                .await
                .map_err(status)?;
            Ok(answer.to_bytes())
        }
        functions::contacts::GetContacts::CONSTRUCTOR_ID => {
            let wanted: functions::contacts::GetContacts = read(query)?;
            let me = signed_in(gateway, header).await?;
            get_contacts(gateway, header, me, wanted.hash).await
        }
        _ => {
            // Each family of methods is its own future on the heap, so the stack of a call
            // holds one family's frame beneath this match's, not every family's at once (a
            // debug build gives each arm's temporaries their own slots).
            if let Some(answer) = Box::pin(media::answer(gateway, uploads, header, id, query)).await
            {
                return answer;
            }
            let messages = messages::answer(gateway, uploads, header, id, query);
            if let Some(answer) = Box::pin(messages).await {
                return answer;
            }
            tracing::debug!(method = oxigram_tl::name_for_id(id), layer = ?call.layer, "MTProto method not supported");
            Err(RpcError::new(400, "METHOD_NOT_SUPPORTED"))
        }
    }
}

/// Telegram's cache hash of a list of ids (its "usual algorithm": every value folded in turn).
fn telegram_hash(values: impl IntoIterator<Item = i64>) -> i64 {
    let mut hash: u64 = 0;
    for value in values {
        hash ^= hash >> 21;
        hash ^= hash << 35;
        hash ^= hash >> 4;
        hash = hash.wrapping_add(value as u64);
    }
    hash as i64
}

/// `contacts.getContacts`: every contact, read page by page through `Contacts.GetContacts`.
/// Telegram clients compute the hash themselves (the contact count, then the contacts' ids
/// ascending), so the door compares that one rather than oxigram's own.
async fn get_contacts(
    gateway: &Arc<Gateway>,
    header: &str,
    me: i64,
    hash: i64,
) -> Result<Vec<u8>, RpcError> {
    let contacts_api = ContactsApi(gateway.clone());
    let mut users: Vec<oxigram_proto::types::v1::User> = Vec::new();
    loop {
        let page = contacts_api
            .get_contacts(request(
                header,
                api::GetContactsRequest {
                    offset_user_id: users.last().map_or(0, |u| u.id),
                    limit: CONTACTS_PAGE,
                    hash: 0,
                },
            )?)
            .await
            .map_err(|s| convert::rpc_error(&s))?
            .into_inner();
        let full = page.users.len() >= CONTACTS_PAGE as usize;
        users.extend(page.users);
        if !full || users.len() >= usize::try_from(page.count).unwrap_or(0) {
            break;
        }
    }
    let saved_count = i32::try_from(users.len()).unwrap_or(i32::MAX);
    let ours =
        telegram_hash(std::iter::once(i64::from(saved_count)).chain(users.iter().map(|u| u.id)));
    if hash != 0 && hash == ours {
        return Ok(enums::contacts::Contacts::NotModified.to_bytes());
    }
    Ok(
        enums::contacts::Contacts::Contacts(types::contacts::Contacts {
            contacts: users
                .iter()
                .map(|u| {
                    enums::Contact::Contact(types::Contact {
                        user_id: u.id,
                        mutual: u.mutual_contact,
                    })
                })
                .collect(),
            saved_count,
            users: convert::users(&users, me),
        })
        .to_bytes(),
    )
}

/// The page this door reads contacts in (`Contacts.GetContacts`' largest).
const CONTACTS_PAGE: i32 = crate::contacts_api::MAX_CONTACTS_PAGE;

/// The page of a difference this door asks for unless the client wants fewer.
const DIFFERENCE_PAGE: i32 = 100;

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
