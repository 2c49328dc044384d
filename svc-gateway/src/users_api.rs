//! The client's Users service: the caller's own profile and privacy rules, and other users
//! found by phone or username (each lookup counted against the caller's lookup limit).

use std::sync::Arc;

use oxigram_errors::{Error, ErrorCode, check_text, forward, status};
use oxigram_proto::{
    api::v1::{
        GetMeRequest, GetPrivacyRequest, GetProfilePhotoRequest, PrivacyChanged, ProfileChanged,
        ResolvePhoneRequest, ResolveUsernameRequest, UpdateProfilePhotoRequest,
        UpdateProfileRequest, UpdateUsernameRequest, UsernameAvailable, users_server::Users,
    },
    media::v1 as media_svc,
    types::v1::{
        FileChunk, GetFileRequest, PrivacyRule, UpdatePrivacy, UpdateProfile, User, update,
    },
};
use tonic::{Request, Response, Status};

use crate::{
    Gateway,
    accounts::{self, Profile},
    auth::SignedIn,
    people,
    privacy::{Key, Rule},
    profile,
};

pub struct UsersApi(pub Arc<Gateway>);

/// What a change does to the caller's profile.
type Change = Box<dyn FnOnce(&mut Profile) -> Result<(), Status> + Send>;

impl Gateway {
    /// One more lookup of other users by `user_id`, or `FLOOD_WAIT_X`.
    pub async fn spend_lookups(&self, user_id: i64, lookups: u32) -> Result<(), Status> {
        let limits = &self.limits;
        limits
            .spend(&limits.lookup, user_id, lookups, "too many lookups")
            .await
    }

    /// The caller's profile as she sees it.
    async fn me(&self, user_id: i64) -> Result<Profile, Status> {
        accounts::profiles_by_ids(&self.pool, &[user_id])
            .await
            .map_err(Error::from)?
            .pop()
            .ok_or_else(|| Error::new(ErrorCode::AuthKeyUnregistered, "the account is gone").into())
    }

    /// Applies `change` to the caller's profile under its row lock; when it changed anything,
    /// stores it with the profile update for her log, in one transaction, and tells the users
    /// who show her once it is committed.
    async fn change_profile(
        self: &Arc<Self>,
        me: SignedIn,
        change: Change,
    ) -> Result<ProfileChanged, Status> {
        let mut tx = self.pool.begin().await.map_err(Error::from)?;
        let before = people::lock_profile(&mut tx, me.user_id)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| {
                Status::from(Error::new(ErrorCode::AuthKeyUnregistered, "no account"))
            })?;
        let mut after = before.clone();
        change(&mut after)?;
        let mut kinds = vec![];
        if after != before {
            if !people::save_profile(&mut tx, &after)
                .await
                .map_err(Error::from)?
            {
                return Err(status(ErrorCode::UsernameOccupied, "the username is taken"));
            }
            kinds.push(update::Kind::Profile(UpdateProfile {
                user: Some(after.own_view()),
            }));
        }
        let changed = !kinds.is_empty();
        let logged = self.commit_with_updates(tx, me, kinds).await?;
        if changed {
            self.push_profile(me.user_id);
        }
        Ok(ProfileChanged {
            user: Some(after.own_view()),
            pts: logged.pts,
            pts_count: logged.pts_count,
        })
    }

    /// The profile photo `user_id` shows `viewer`, if any.
    async fn photo_for(&self, viewer: i64, user_id: i64) -> Result<Option<i64>, Status> {
        Ok(self
            .user_for(viewer, user_id)
            .await?
            .map(|u| u.photo_id)
            .filter(|&id| id != 0))
    }
}

/// A phone as a caller types it: digits, an optional leading `+` (dropped).
fn normalize_phone(phone: &str) -> &str {
    phone.strip_prefix('+').unwrap_or(phone)
}

#[tonic::async_trait]
impl Users for UsersApi {
    async fn get_me(&self, request: Request<GetMeRequest>) -> Result<Response<User>, Status> {
        let (me, _) = self.0.signed_in(request).await?;
        Ok(Response::new(self.0.me(me.user_id).await?.own_view()))
    }

    async fn resolve_phone(
        &self,
        request: Request<ResolvePhoneRequest>,
    ) -> Result<Response<User>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        self.0.spend_lookups(me.user_id, 1).await?;
        check_text("phone", &request.phone)?;
        let phone = normalize_phone(&request.phone);
        let not_found = || status(ErrorCode::PhoneNotOccupied, "no user to find by this phone");
        let owner = accounts::user_by_phone(&self.0.pool, phone)
            .await
            .map_err(Error::from)?
            .ok_or_else(not_found)?;
        // Her FIND_BY_PHONE rule decides; refused looks exactly like no such user.
        let findable = self.0.findable_by_phone(me.user_id, &[owner.id]).await?;
        if !findable.contains(&owner.id) {
            return Err(not_found());
        }
        let user = self.0.user_for(me.user_id, owner.id).await?;
        user.map(Response::new).ok_or_else(not_found)
    }

    async fn resolve_username(
        &self,
        request: Request<ResolveUsernameRequest>,
    ) -> Result<Response<User>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        self.0.spend_lookups(me.user_id, 1).await?;
        let username = profile::username_to_resolve(&request.username)?;
        let not_found = || status(ErrorCode::UsernameNotOccupied, "no user has this username");
        let owner = people::profile_by_username(&self.0.pool, &username)
            .await
            .map_err(Error::from)?
            .ok_or_else(not_found)?;
        let user = self.0.user_for(me.user_id, owner.id).await?;
        user.map(Response::new).ok_or_else(not_found)
    }

    async fn update_profile(
        &self,
        request: Request<UpdateProfileRequest>,
    ) -> Result<Response<ProfileChanged>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        let first_name = r
            .first_name
            .as_deref()
            .map(|n| profile::first_name("first_name", n))
            .transpose()?;
        let last_name = r
            .last_name
            .as_deref()
            .map(|n| profile::last_name("last_name", n))
            .transpose()?;
        let about = r.about.as_deref().map(profile::about).transpose()?;
        let change: Change = Box::new(move |p| {
            if let Some(first_name) = first_name {
                p.first_name = first_name;
            }
            if let Some(last_name) = last_name {
                p.last_name = last_name;
            }
            if let Some(about) = about {
                p.about = about;
            }
            Ok(())
        });
        Ok(Response::new(self.0.change_profile(me, change).await?))
    }

    async fn update_username(
        &self,
        request: Request<UpdateUsernameRequest>,
    ) -> Result<Response<ProfileChanged>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        // Empty removes the username.
        let username = if r.username.is_empty() {
            None
        } else {
            Some(profile::username(&r.username)?)
        };
        let change: Change = Box::new(move |p| {
            if p.username == username {
                return Err(status(
                    ErrorCode::UsernameNotModified,
                    "the caller has this username already",
                ));
            }
            p.username = username;
            Ok(())
        });
        Ok(Response::new(self.0.change_profile(me, change).await?))
    }

    async fn check_username(
        &self,
        request: Request<UpdateUsernameRequest>,
    ) -> Result<Response<UsernameAvailable>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        let username = profile::username(&r.username)?;
        let holder = people::profile_by_username(&self.0.pool, &username)
            .await
            .map_err(Error::from)?;
        let available = holder.is_none_or(|h| h.id == me.user_id);
        Ok(Response::new(UsernameAvailable { available }))
    }

    async fn update_profile_photo(
        &self,
        request: Request<UpdateProfilePhotoRequest>,
    ) -> Result<Response<ProfileChanged>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        let file_id = r.file_id;
        if file_id < 0 {
            return Err(status(ErrorCode::FileIdInvalid, "not a file reference"));
        }
        if file_id != 0 {
            // The photo is a file of the caller's: svc-media answers FILE_ID_INVALID otherwise.
            // The probe reads the smallest window a download may ask for (4 KiB).
            let probe = media_svc::GetFileRequest {
                owner_id: me.user_id,
                request: Some(GetFileRequest {
                    id: file_id,
                    offset: 0,
                    limit: 4096,
                }),
            };
            self.0
                .media
                .clone()
                .get_file(probe)
                .await
                .map_err(forward)?;
        }
        let change: Change = Box::new(move |p| {
            p.photo_file_id = file_id;
            Ok(())
        });
        Ok(Response::new(self.0.change_profile(me, change).await?))
    }

    async fn get_profile_photo(
        &self,
        request: Request<GetProfilePhotoRequest>,
    ) -> Result<Response<FileChunk>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        let photo = self.0.photo_for(me.user_id, r.user_id).await?;
        let photo = photo.ok_or_else(|| {
            status(
                ErrorCode::PhotoInvalid,
                "no profile photo the caller may see",
            )
        })?;
        // Read as its owner's file: the user view said the caller may see it.
        let request = media_svc::GetFileRequest {
            owner_id: r.user_id,
            request: Some(GetFileRequest {
                id: photo,
                offset: r.offset,
                limit: r.limit,
            }),
        };
        self.0
            .media
            .clone()
            .get_file(request)
            .await
            .map_err(forward)
    }

    async fn get_privacy(
        &self,
        request: Request<GetPrivacyRequest>,
    ) -> Result<Response<PrivacyRule>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        let key = Key::from_number(r.key)
            .ok_or_else(|| status(ErrorCode::PrivacyKeyInvalid, "no such privacy key"))?;
        let rules = people::privacy_rules(&self.0.pool, &[me.user_id], &[key])
            .await
            .map_err(Error::from)?;
        Ok(Response::new(rules.of(me.user_id, key).to_proto()))
    }

    async fn set_privacy(
        &self,
        request: Request<PrivacyRule>,
    ) -> Result<Response<PrivacyChanged>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        let rule = Rule::from_proto(&r)?;
        let mut tx = self.0.pool.begin().await.map_err(Error::from)?;
        people::set_privacy_rule(&mut tx, me.user_id, &rule)
            .await
            .map_err(Error::from)?;
        let kinds = vec![update::Kind::Privacy(UpdatePrivacy {
            rule: Some(rule.to_proto()),
        })];
        let logged = self.0.commit_with_updates(tx, me, kinds).await?;
        Ok(Response::new(PrivacyChanged {
            rule: Some(rule.to_proto()),
            pts: logged.pts,
            pts_count: logged.pts_count,
        }))
    }
}
