//! Generated gRPC code, one module per proto package: the client API (`api::v1`), each
//! internal service's API (`messages::v1`, `updates::v1`, `dialogs::v1`, `dispatch::v1`,
//! `media::v1`, `gateway::v1`), the operators' admin API (`admin::v1`) and the domain types they share (`types::v1`); and the codec of
//! the client API's servers (`codec`). An internal service's package holds its own API only:
//! what two services both speak is in `types`, and so are the client's requests that an
//! internal API takes as they are (`api::v1` re-exports them, so a client names every message
//! of its API in one module). The generated `*_client` modules are the typed clients of every
//! API.

pub mod codec;
pub mod dialog_rules;
pub mod http2;

pub use dialog_rules::dialogs_hash;

/// One proto package `oxigram.<name>.v1` as the module `<name>::v1`, with any items after
/// the package's name added to it.
macro_rules! package {
    ($name:ident, $package:literal $(, $extra:item)*) => {
        #[allow(clippy::all, clippy::pedantic, missing_docs)]
        pub mod $name {
            pub mod v1 {
                tonic::include_proto!($package);
                $($extra)*
            }
        }
    };
}

package!(types, "oxigram.types.v1");
package!(
    api,
    "oxigram.api.v1",
    /// The client API's messages that are declared in `types`: the internal APIs take or
    /// give them as they are.
    pub use crate::types::v1::{
        AffectedMessages, BlockRequest, BlockResponse, CompleteUploadRequest, Dialog, Difference,
        EditMessageRequest, EditMessageResponse, File, FileChunk, ForwardMessagesRequest,
        ForwardMessagesResponse, GetBlockedRequest, GetDialogsRequest, GetDifferenceRequest,
        GetFileRequest, GetHistoryRequest, GetMessagesRequest, GetOutboxReadDateRequest,
        OutboxReadDate, ReadHistoryRequest, ReceivedMessagesRequest, ReceivedMessagesResponse,
        SaveFilePartRequest, SaveFilePartResponse, SearchRequest, SendMessageRequest,
        SendMessageResponse, AffectedHistory, DeleteHistoryRequest, DeleteMessagesRequest,
        SendMessageAction, UpdateUserStatus, UpdateUserTyping, UserStatus, send_message_action,
        user_status, DialogFilter, DialogFilters, DraftMessage, EditPeerFoldersRequest, FolderPeer,
        GetNotifySettingsRequest, GetPeerDialogsRequest, GetPeerSettingsRequest,
        HidePeerSettingsBarRequest, InputFolderPeer, MarkDialogUnreadRequest, PeerNotifySettings,
        PeerSettings, PtsUpdate, ReorderPinnedDialogsRequest, SaveDraftRequest,
        ToggleDialogPinRequest, UpdateDialogFilterRequest, UpdateDialogFiltersOrderRequest,
        UpdateNotifySettingsRequest, GetMessageFileRequest, InputMedia, InputSingleMedia,
        MessageMedia, PhotoSize, SendMediaRequest, SendMediaResponse, UploadByHashRequest,
        ReadMessageContentsRequest, SendReactionRequest, ReadReactionsRequest,
    };
);

package!(messages, "oxigram.messages.v1");
package!(updates, "oxigram.updates.v1");
package!(dialogs, "oxigram.dialogs.v1");
package!(dispatch, "oxigram.dispatch.v1");
package!(media, "oxigram.media.v1");
package!(gateway, "oxigram.gateway.v1");
package!(admin, "oxigram.admin.v1");

/// Encoded file descriptors of every package, for the gRPC reflection service.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("oxigram_descriptor");

/// The metadata entry that carries a device's auth key on every client-API call but
/// `CreateAuthKey`: `<auth_key_id>:<secret hex>`. Part of the client API's contract, so the
/// gateway and every client name it from here.
pub const AUTH_KEY_HEADER: &str = "x-oxigram-auth-key";

/// Constructors and the one resolution rule of the peers a request names and an answer gives.
mod peers {
    use crate::types::v1::{InputPeer, InputPeerSelf, InputPeerUser, Peer, input_peer, peer};

    impl InputPeer {
        /// A user by id.
        pub fn user(user_id: i64) -> Self {
            Self {
                kind: Some(input_peer::Kind::User(InputPeerUser { user_id })),
            }
        }

        /// The caller herself (Saved Messages).
        pub fn me() -> Self {
            Self {
                kind: Some(input_peer::Kind::Self_(InputPeerSelf {})),
            }
        }

        /// The user this peer names for `owner_id`, or `None` when it names none (no kind, or
        /// a user id that is not positive). The caller answers `None` with `PEER_ID_INVALID`.
        pub fn resolve(&self, owner_id: i64) -> Option<i64> {
            match self.kind.as_ref()? {
                input_peer::Kind::Self_(_) => Some(owner_id),
                input_peer::Kind::User(u) if u.user_id > 0 => Some(u.user_id),
                input_peer::Kind::User(_) => None,
            }
        }
    }

    impl Peer {
        /// A user's dialog.
        pub fn user(user_id: i64) -> Self {
            Self {
                kind: Some(peer::Kind::UserId(user_id)),
            }
        }

        /// The user this peer is, if it is one.
        pub fn user_id(&self) -> Option<i64> {
            self.kind.map(|peer::Kind::UserId(id)| id)
        }
    }

    /// Resolves an optional request peer (absent = invalid).
    pub fn resolve(peer: Option<&InputPeer>, owner_id: i64) -> Option<i64> {
        peer?.resolve(owner_id)
    }

    /// [`resolve`] at a service's boundary: the user the request's peer names for `owner_id`,
    /// or `PEER_ID_INVALID`.
    pub fn require(peer: Option<&InputPeer>, owner_id: i64) -> Result<i64, tonic::Status> {
        resolve(peer, owner_id).ok_or_else(|| {
            oxigram_errors::status(
                oxigram_errors::ErrorCode::PeerIdInvalid,
                "the peer names no user",
            )
        })
    }

    /// `peer_user()` on every answer that names its dialog by a [`Peer`]: the peer's user id,
    /// 0 when the peer names no user (the server always sets one).
    macro_rules! peer_user {
        ($($message:ty => $field:ident),* $(,)?) => {$(
            impl $message {
                /// The user of this answer's peer (0 when it names none).
                pub fn peer_user(&self) -> i64 {
                    self.$field.as_ref().and_then(Peer::user_id).unwrap_or(0)
                }
            }
        )*};
    }
    use crate::types::v1::{
        Dialog, FolderPeer, Message, UpdateDeliveredOutbox, UpdateDialogPinned,
        UpdateDialogUnreadMark, UpdateDraftMessage, UpdateMessageReactions, UpdateNotifySettings,
        UpdatePeerSettingsBarHidden, UpdateReadHistoryInbox, UpdateReadHistoryOutbox,
        UpdateReadReactions,
    };
    peer_user!(
        Message => peer_id,
        FolderPeer => peer,
        UpdateDialogPinned => peer,
        UpdateDialogUnreadMark => peer,
        UpdateNotifySettings => peer,
        UpdateDraftMessage => peer,
        UpdatePeerSettingsBarHidden => peer,
        Dialog => peer,
        UpdateReadHistoryInbox => peer,
        UpdateReadHistoryOutbox => peer,
        UpdateDeliveredOutbox => peer,
        UpdateMessageReactions => peer,
        UpdateReadReactions => peer,
    );
}
pub use peers::{require as require_peer, resolve as resolve_peer};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::v1::{InputPeer, Message, Peer};

    #[test]
    fn one_rule_resolves_every_request_peer() {
        let owner = 5;
        let table: [(Option<InputPeer>, Option<i64>); 6] = [
            (None, None),
            (Some(InputPeer::default()), None),
            (Some(InputPeer::user(0)), None),
            (Some(InputPeer::user(-3)), None),
            (Some(InputPeer::user(9)), Some(9)),
            (Some(InputPeer::me()), Some(owner)),
        ];
        for (peer, expected) in table {
            assert_eq!(resolve_peer(peer.as_ref(), owner), expected, "{peer:?}");
            let required = require_peer(peer.as_ref(), owner);
            match expected {
                Some(id) => assert_eq!(required.ok(), Some(id), "{peer:?}"),
                None => assert_eq!(
                    required
                        .err()
                        .and_then(|s| oxigram_errors::code_of(&s))
                        .as_deref(),
                    Some("PEER_ID_INVALID"),
                    "{peer:?}"
                ),
            }
        }
    }

    #[test]
    fn answers_name_their_peer_user() {
        let m = Message {
            peer_id: Some(Peer::user(7)),
            ..Default::default()
        };
        assert_eq!(m.peer_user(), 7);
        assert_eq!(Message::default().peer_user(), 0);
    }
}
