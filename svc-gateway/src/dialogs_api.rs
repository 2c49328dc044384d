//! The client's Dialogs service: dialogs and the user's settings of them from svc-dialogs,
//! their top messages from svc-messages, and the peers from this gateway's accounts.

use std::sync::Arc;

use oxigram_errors::{Error, ErrorCode, forward, status};
use oxigram_proto::{
    api::v1::{
        DialogFilters, DialogsSlice, EditPeerFoldersRequest, GetDialogFiltersRequest,
        GetDialogsRequest, GetMessagesRequest, GetNotifySettingsRequest, GetPeerDialogsRequest,
        GetPeerSettingsRequest, HidePeerSettingsBarRequest, MarkDialogUnreadRequest,
        PeerNotifySettings, PeerSettings, PtsUpdate, ReorderPinnedDialogsRequest, SaveDraftRequest,
        ToggleDialogPinRequest, UpdateDialogFilterRequest, UpdateDialogFiltersOrderRequest,
        UpdateNotifySettingsRequest, dialogs_server::Dialogs,
    },
    dialogs::v1 as dialogs_svc,
    types::v1::DialogsPage,
};
use tonic::{Request, Response, Status};

use crate::{Gateway, acting::Acting, messages_api::user_ids_of, people};

pub struct DialogsApi(pub Arc<Gateway>);

impl DialogsApi {
    /// A page of dialogs as the client gets it: with their top messages and the users they
    /// name, unless the client holds the page already.
    async fn slice(&self, me: i64, page: DialogsPage) -> Result<DialogsSlice, Status> {
        let DialogsPage {
            dialogs,
            count,
            hash,
            not_modified,
        } = page;
        let top_ids = GetMessagesRequest {
            ids: dialogs
                .iter()
                .map(|d| d.top_message_id)
                .filter(|id| *id > 0)
                .collect(),
        };
        if dialogs.is_empty() {
            let messages = self.0.messages_by_ids(me, top_ids).await?;
            return Ok(DialogsSlice {
                dialogs,
                messages,
                users: Vec::new(),
                count,
                hash,
                not_modified,
            });
        }
        // The peers and the caller are the users a private chat's top messages name, but for a
        // forward's original author: they are read side by side with the messages, and only
        // a forward's author, when there is one, after them.
        let peers: Vec<i64> = dialogs.iter().map(|d| d.peer_user()).collect();
        let mut asked = peers.clone();
        asked.push(me);
        let (messages, users) = tokio::join!(
            self.0.messages_by_ids(me, top_ids),
            self.0.users_for(me, &asked),
        );
        let (messages, mut users) = (messages?, users?);
        let mut named = user_ids_of(&messages, &peers);
        named.sort_unstable();
        named.dedup();
        let more: Vec<i64> = named
            .iter()
            .copied()
            .filter(|id| !asked.contains(id))
            .collect();
        if !more.is_empty() {
            users.extend(self.0.users_for(me, &more).await?);
            users.sort_unstable_by_key(|u| u.id);
        }
        users.retain(|u| named.binary_search(&u.id).is_ok());
        Ok(DialogsSlice {
            dialogs,
            messages,
            users,
            count,
            hash,
            not_modified,
        })
    }
}

/// A settings call that names a `peer`: the peer must be an existing user; then the domain
/// service's answer as it is.
macro_rules! peer_setting {
    ($self:ident, $request:ident, $internal:ty, $method:ident) => {{
        let (me, request) = $self.0.signed_in($request).await?;
        $self
            .0
            .existing_peer(me.user_id, request.peer.as_ref())
            .await?;
        let request = <$internal>::acting(me, request);
        $self
            .0
            .dialogs
            .clone()
            .$method(request)
            .await
            .map_err(forward)
    }};
}

/// A call passed on as it is, acting for the caller.
macro_rules! passed_on {
    ($self:ident, $request:ident, $internal:ty, $method:ident) => {{
        let (me, request) = $self.0.signed_in($request).await?;
        let request = <$internal>::acting(me, request);
        $self
            .0
            .dialogs
            .clone()
            .$method(request)
            .await
            .map_err(forward)
    }};
}

#[tonic::async_trait]
impl Dialogs for DialogsApi {
    async fn get_dialogs(
        &self,
        request: Request<GetDialogsRequest>,
    ) -> Result<Response<DialogsSlice>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let request = dialogs_svc::GetDialogsRequest::acting(me, request);
        let page = self.0.dialogs.clone().get_dialogs(request).await;
        let page = page.map_err(forward)?.into_inner();
        Ok(Response::new(self.slice(me.user_id, page).await?))
    }

    async fn get_peer_dialogs(
        &self,
        request: Request<GetPeerDialogsRequest>,
    ) -> Result<Response<DialogsSlice>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let request = dialogs_svc::GetPeerDialogsRequest::acting(me, request);
        let page = self.0.dialogs.clone().get_peer_dialogs(request).await;
        let page = page.map_err(forward)?.into_inner();
        Ok(Response::new(self.slice(me.user_id, page).await?))
    }

    async fn toggle_dialog_pin(
        &self,
        request: Request<ToggleDialogPinRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        peer_setting!(
            self,
            request,
            dialogs_svc::ToggleDialogPinRequest,
            toggle_dialog_pin
        )
    }

    async fn reorder_pinned_dialogs(
        &self,
        request: Request<ReorderPinnedDialogsRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        passed_on!(
            self,
            request,
            dialogs_svc::ReorderPinnedDialogsRequest,
            reorder_pinned_dialogs
        )
    }

    async fn edit_peer_folders(
        &self,
        request: Request<EditPeerFoldersRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        for fp in &request.folder_peers {
            self.0.existing_peer(me.user_id, fp.peer.as_ref()).await?;
        }
        let request = dialogs_svc::EditPeerFoldersRequest::acting(me, request);
        let moved = self.0.dialogs.clone().edit_peer_folders(request).await;
        moved.map_err(forward)
    }

    async fn mark_dialog_unread(
        &self,
        request: Request<MarkDialogUnreadRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        peer_setting!(
            self,
            request,
            dialogs_svc::MarkDialogUnreadRequest,
            mark_dialog_unread
        )
    }

    async fn update_notify_settings(
        &self,
        request: Request<UpdateNotifySettingsRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        peer_setting!(
            self,
            request,
            dialogs_svc::UpdateNotifySettingsRequest,
            update_notify_settings
        )
    }

    async fn get_notify_settings(
        &self,
        request: Request<GetNotifySettingsRequest>,
    ) -> Result<Response<PeerNotifySettings>, Status> {
        peer_setting!(
            self,
            request,
            dialogs_svc::GetNotifySettingsRequest,
            get_notify_settings
        )
    }

    async fn save_draft(
        &self,
        request: Request<SaveDraftRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let peer = self
            .0
            .existing_peer(me.user_id, request.peer.as_ref())
            .await?;
        // A draft's reply, like a send's, is a message of its dialog in the caller's box;
        // svc-messages holds the boxes, so it is asked before svc-dialogs logs the draft (a
        // negative id is svc-dialogs' to refuse).
        if request.reply_to_msg_id > 0 {
            let ids = GetMessagesRequest {
                ids: vec![request.reply_to_msg_id],
            };
            let found = self.0.messages_by_ids(me.user_id, ids).await?;
            if !found.iter().any(|m| m.peer_user() == peer) {
                return Err(status(
                    ErrorCode::MessageIdInvalid,
                    "reply_to_msg_id names no message of this dialog",
                ));
            }
        }
        let request = dialogs_svc::SaveDraftRequest::acting(me, request);
        let saved = self.0.dialogs.clone().save_draft(request).await;
        saved.map_err(forward)
    }

    async fn get_peer_settings(
        &self,
        request: Request<GetPeerSettingsRequest>,
    ) -> Result<Response<PeerSettings>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let peer = self
            .0
            .existing_peer(me.user_id, request.peer.as_ref())
            .await?;
        let request = dialogs_svc::GetPeerSettingsRequest::acting(me, request);
        let settings = self.0.dialogs.clone().get_peer_settings(request).await;
        let mut settings = settings.map_err(forward)?.into_inner();
        // svc-dialogs knows who wrote, the gateway the owner's contacts: one kept already is
        // not offered again.
        if settings.add_contact {
            let kept = people::kept_of(&self.0.pool, me.user_id, &[peer])
                .await
                .map_err(Error::from)?;
            settings.add_contact = kept.is_empty();
        }
        Ok(Response::new(settings))
    }

    async fn hide_peer_settings_bar(
        &self,
        request: Request<HidePeerSettingsBarRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        peer_setting!(
            self,
            request,
            dialogs_svc::HidePeerSettingsBarRequest,
            hide_peer_settings_bar
        )
    }

    async fn update_dialog_filter(
        &self,
        request: Request<UpdateDialogFilterRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        passed_on!(
            self,
            request,
            dialogs_svc::UpdateDialogFilterRequest,
            update_dialog_filter
        )
    }

    async fn update_dialog_filters_order(
        &self,
        request: Request<UpdateDialogFiltersOrderRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        passed_on!(
            self,
            request,
            dialogs_svc::UpdateDialogFiltersOrderRequest,
            update_dialog_filters_order
        )
    }

    async fn get_dialog_filters(
        &self,
        request: Request<GetDialogFiltersRequest>,
    ) -> Result<Response<DialogFilters>, Status> {
        let (me, _) = self.0.signed_in(request).await?;
        let request = dialogs_svc::GetDialogFiltersRequest {
            owner_id: me.user_id,
        };
        let filters = self.0.dialogs.clone().get_dialog_filters(request).await;
        filters.map_err(forward)
    }
}
