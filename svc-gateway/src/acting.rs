//! The internal requests the gateway makes of a client's request: each domain service takes
//! the client's request as it came, beside the signed-in caller it acts for (and her device,
//! where the service tells the device's session apart). One line per internal request here,
//! so an RPC of the gateway never copies a field; GetDialogs, which may carry the caller's
//! contacts, has a function of its own.

use oxigram_proto::{
    dialogs::v1 as dialogs, media::v1 as media, messages::v1 as messages, types::v1 as types,
    updates::v1 as updates,
};

use sqlx::PgPool;

use crate::{auth::SignedIn, people};

/// GetDialogs acting for the caller. A request that names a dialog filter carries her
/// contacts, which a filter of contacts or of non-contacts sorts dialogs by (svc-dialogs knows
/// the filter, the gateway the contacts); a page of a folder reads none.
pub async fn get_dialogs(
    pool: &PgPool,
    me: SignedIn,
    request: types::GetDialogsRequest,
) -> Result<dialogs::GetDialogsRequest, sqlx::Error> {
    let contacts = if request.filter_id != 0 {
        let user_ids = people::contact_ids(pool, me.user_id).await?;
        Some(dialogs::ContactList { user_ids })
    } else {
        None
    };
    Ok(dialogs::GetDialogsRequest {
        owner_id: me.user_id,
        request: Some(request),
        contacts,
    })
}

/// An internal request acting for the signed-in caller on her request `T`.
pub trait Acting<T> {
    fn acting(me: SignedIn, request: T) -> Self;
}

/// `internal { user field [, device field] } = client request;`
macro_rules! acting {
    ($($internal:ty { $user:ident $(, $device:ident)? } = $client:ty;)*) => {$(
        impl Acting<$client> for $internal {
            fn acting(me: SignedIn, request: $client) -> Self {
                Self {
                    $user: me.user_id,
                    $($device: me.auth_key_id,)?
                    request: Some(request),
                }
            }
        }
    )*};
}

acting! {
    messages::SendMessageRequest { sender_id, auth_key_id } = types::SendMessageRequest;
    messages::ForwardMessagesRequest { owner_id, auth_key_id } = types::ForwardMessagesRequest;
    messages::EditMessageRequest { owner_id, auth_key_id } = types::EditMessageRequest;
    messages::DeleteMessagesRequest { owner_id, auth_key_id } = types::DeleteMessagesRequest;
    messages::DeleteHistoryRequest { owner_id, auth_key_id } = types::DeleteHistoryRequest;
    messages::GetHistoryRequest { owner_id } = types::GetHistoryRequest;
    messages::GetMessagesRequest { owner_id } = types::GetMessagesRequest;
    messages::BlockRequest { owner_id } = types::BlockRequest;
    messages::GetBlockedRequest { owner_id } = types::GetBlockedRequest;
    messages::SearchRequest { owner_id } = types::SearchRequest;
    dialogs::GetPeerDialogsRequest { owner_id } = types::GetPeerDialogsRequest;
    dialogs::ToggleDialogPinRequest { owner_id, auth_key_id } = types::ToggleDialogPinRequest;
    dialogs::ReorderPinnedDialogsRequest { owner_id, auth_key_id } = types::ReorderPinnedDialogsRequest;
    dialogs::EditPeerFoldersRequest { owner_id, auth_key_id } = types::EditPeerFoldersRequest;
    dialogs::MarkDialogUnreadRequest { owner_id, auth_key_id } = types::MarkDialogUnreadRequest;
    dialogs::UpdateNotifySettingsRequest { owner_id, auth_key_id } = types::UpdateNotifySettingsRequest;
    dialogs::GetNotifySettingsRequest { owner_id } = types::GetNotifySettingsRequest;
    dialogs::SaveDraftRequest { owner_id, auth_key_id } = types::SaveDraftRequest;
    dialogs::GetPeerSettingsRequest { owner_id } = types::GetPeerSettingsRequest;
    dialogs::HidePeerSettingsBarRequest { owner_id, auth_key_id } = types::HidePeerSettingsBarRequest;
    dialogs::UpdateDialogFilterRequest { owner_id, auth_key_id } = types::UpdateDialogFilterRequest;
    dialogs::UpdateDialogFiltersOrderRequest { owner_id, auth_key_id } = types::UpdateDialogFiltersOrderRequest;
    dialogs::ReadHistoryRequest { owner_id, auth_key_id } = types::ReadHistoryRequest;
    dialogs::GetOutboxReadDateRequest { owner_id } = types::GetOutboxReadDateRequest;
    dialogs::ReceivedMessagesRequest { owner_id, auth_key_id } = types::ReceivedMessagesRequest;
    updates::GetDifferenceRequest { user_id } = types::GetDifferenceRequest;
    media::SaveFilePartRequest { owner_id } = types::SaveFilePartRequest;
    media::CompleteUploadRequest { owner_id } = types::CompleteUploadRequest;
    media::GetFileRequest { owner_id } = types::GetFileRequest;
}
