//! The internal requests the gateway makes of a client's request: each domain service takes
//! the client's request as it came, beside the signed-in caller it acts for (and her device,
//! where the service tells the device's session apart). One line per internal request here,
//! so an RPC of the gateway never copies a field.

use oxigram_proto::{
    dialogs::v1 as dialogs, media::v1 as media, messages::v1 as messages, types::v1 as types,
    updates::v1 as updates,
};

use crate::auth::SignedIn;

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
    messages::ReadMessageContentsRequest { owner_id, auth_key_id } = types::ReadMessageContentsRequest;
    messages::SendReactionRequest { owner_id, auth_key_id } = types::SendReactionRequest;
    messages::ReadReactionsRequest { owner_id, auth_key_id } = types::ReadReactionsRequest;
    messages::GetHistoryRequest { owner_id } = types::GetHistoryRequest;
    messages::GetMessagesRequest { owner_id } = types::GetMessagesRequest;
    messages::BlockRequest { owner_id } = types::BlockRequest;
    messages::GetBlockedRequest { owner_id } = types::GetBlockedRequest;
    messages::SearchRequest { owner_id } = types::SearchRequest;
    dialogs::GetDialogsRequest { owner_id } = types::GetDialogsRequest;
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
