//! A device's connection to the gateway: every call signed with its auth key, bounded by its
//! deadline, answered as the message itself or an [`Error`] with a stable code.

use std::time::Duration;

use oxigram_proto::{
    api::v1::{
        AffectedHistory, AffectedMessages, ContactList, ContactsChanged, CreateAuthKeyRequest,
        DeleteContactsRequest, DeleteHistoryRequest, DeleteMessagesRequest, DialogsSlice,
        Difference, EditMessageRequest, EditMessageResponse, ForwardMessagesRequest,
        ForwardMessagesResponse, GetContactsRequest, GetDialogsRequest, GetDifferenceRequest,
        GetHistoryRequest, GetMeRequest, GetPrivacyRequest, GetStateRequest, ImportContactsRequest,
        ImportedContacts, InputContact, MessagesSlice, PrivacyChanged, ProfileChanged,
        ReadHistoryRequest, ReadMessageContentsRequest, ReadReactionsRequest, ResolvePhoneRequest,
        ResolveUsernameRequest, SendCodeRequest, SendMessageAction, SendMessageRequest,
        SendMessageResponse, SendReactionRequest, SetTypingRequest, SetTypingResponse,
        SignInRequest, SignUpRequest, StreamEvent, StreamRequest, UpdateProfileRequest,
        UpdateStatusRequest, UpdateStatusResponse, UpdateUsernameRequest,
        account_client::AccountClient, auth_client::AuthClient, contacts_client::ContactsClient,
        dialogs_client::DialogsClient, messages_client::MessagesClient,
        updates_client::UpdatesClient, users_client::UsersClient,
    },
    http2,
    types::v1::{
        DialogFilter, DialogFilters, EditPeerFoldersRequest, GetNotifySettingsRequest,
        GetPeerDialogsRequest, GetPeerSettingsRequest, HidePeerSettingsBarRequest, InputFolderPeer,
        InputPeer, MarkDialogUnreadRequest, PeerNotifySettings, PeerSettings, PrivacyRule,
        PtsUpdate, ReorderPinnedDialogsRequest, SaveDraftRequest, ToggleDialogPinRequest,
        UpdateDialogFilterRequest, UpdateDialogFiltersOrderRequest, UpdateNotifySettingsRequest,
        UpdatesState, User,
    },
};
use tonic::{
    Streaming,
    service::interceptor::InterceptedService,
    transport::{Channel, Endpoint},
};

use crate::{AuthKey, Deadline, Error, SignWithKey};

/// Updates per getDifference slice.
pub const DIFFERENCE_LIMIT: i32 = 100;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One HTTP/2 connection to the gateway at `address` (`http://host:port`). Devices may share
/// it: each [`Client`] signs its own calls.
pub async fn connect(address: &str) -> Result<Channel, Error> {
    Endpoint::from_shared(address.to_owned())
        .map_err(|_| Error::BadAddress(address.to_owned()))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .initial_stream_window_size(http2::STREAM_WINDOW)
        .initial_connection_window_size(http2::CONNECTION_WINDOW)
        .max_frame_size(http2::MAX_FRAME)
        .connect()
        .await
        .map_err(|source| Error::Unreachable {
            address: address.to_owned(),
            source,
        })
}

/// A channel whose every call is signed with one auth key.
pub type Signed = InterceptedService<Channel, SignWithKey>;

/// A login in progress: the phone and the hash `SendCode` answered, to be completed with the
/// code the user received.
#[derive(Clone, Debug)]
pub struct LoginCode {
    pub phone: String,
    pub phone_code_hash: String,
}

/// One device talking to the gateway. Cloning is cheap and shares the connection.
#[derive(Clone)]
pub struct Client {
    channel: Signed,
    key: AuthKey,
    deadline: Deadline,
}

impl Client {
    /// A device with a saved auth key.
    pub fn new(channel: Channel, key: AuthKey) -> Result<Self, Error> {
        Ok(Self {
            channel: InterceptedService::new(channel, SignWithKey::new(&key)?),
            key,
            deadline: Deadline::NONE,
        })
    }

    /// A new device: asks the gateway for an auth key (the only unsigned call).
    pub async fn create(channel: Channel, device_model: &str) -> Result<Self, Error> {
        let key = AuthClient::new(channel.clone())
            .create_auth_key(CreateAuthKeyRequest {
                device_model: device_model.to_owned(),
            })
            .await?
            .into_inner();
        Self::new(
            channel,
            AuthKey {
                id: key.auth_key_id,
                secret: key.secret,
            },
        )
    }

    /// Bounds every unary call (and the opening of the update stream) by `limit`.
    pub fn with_deadline(mut self, limit: Duration) -> Self {
        self.deadline = Deadline::after(limit);
        self
    }

    pub fn auth_key(&self) -> &AuthKey {
        &self.key
    }

    pub fn deadline(&self) -> Deadline {
        self.deadline
    }

    /// The signed channel, for any client of the API this type has no method for.
    pub fn channel(&self) -> Signed {
        self.channel.clone()
    }
    pub fn auth(&self) -> AuthClient<Signed> {
        AuthClient::new(self.channel.clone())
    }
    pub fn users(&self) -> UsersClient<Signed> {
        UsersClient::new(self.channel.clone())
    }
    pub fn contacts(&self) -> ContactsClient<Signed> {
        ContactsClient::new(self.channel.clone())
    }
    pub fn messages(&self) -> MessagesClient<Signed> {
        MessagesClient::new(self.channel.clone())
    }
    pub fn updates(&self) -> UpdatesClient<Signed> {
        UpdatesClient::new(self.channel.clone())
    }
    pub fn dialogs(&self) -> DialogsClient<Signed> {
        DialogsClient::new(self.channel.clone())
    }
    pub fn account(&self) -> AccountClient<Signed> {
        AccountClient::new(self.channel.clone())
    }

    // Auth -----------------------------------------------------------------------------------

    /// Asks for a login code for `phone` (in development it appears in the gateway's log).
    pub async fn request_code(&self, phone: &str) -> Result<LoginCode, Error> {
        let d = self.deadline;
        let sent = d
            .unary(self.auth().send_code(d.request(SendCodeRequest {
                phone: phone.to_owned(),
            })))
            .await?;
        Ok(LoginCode {
            phone: phone.to_owned(),
            phone_code_hash: sent.phone_code_hash,
        })
    }

    /// Signs this device in to the account of the code's phone.
    pub async fn sign_in(&self, login: &LoginCode, code: &str) -> Result<User, Error> {
        let d = self.deadline;
        let auth = d
            .unary(self.auth().sign_in(d.request(SignInRequest {
                phone: login.phone.clone(),
                phone_code_hash: login.phone_code_hash.clone(),
                code: code.to_owned(),
            })))
            .await?;
        auth.user.ok_or(Error::Missing("user"))
    }

    /// Creates the account of a new phone and signs this device in to it.
    pub async fn sign_up(
        &self,
        login: &LoginCode,
        code: &str,
        first_name: &str,
    ) -> Result<User, Error> {
        let d = self.deadline;
        let auth = d
            .unary(self.auth().sign_up(d.request(SignUpRequest {
                phone: login.phone.clone(),
                phone_code_hash: login.phone_code_hash.clone(),
                code: code.to_owned(),
                first_name: first_name.to_owned(),
            })))
            .await?;
        auth.user.ok_or(Error::Missing("user"))
    }

    /// Signs in, or signs up with `first_name` when the phone has no account yet
    /// (`PHONE_NUMBER_UNOCCUPIED`): the same code serves both.
    pub async fn sign_in_or_up(
        &self,
        login: &LoginCode,
        code: &str,
        first_name: &str,
    ) -> Result<User, Error> {
        match self.sign_in(login, code).await {
            Err(e) if e.code() == "PHONE_NUMBER_UNOCCUPIED" => {
                self.sign_up(login, code, first_name).await
            }
            other => other,
        }
    }

    // Users ----------------------------------------------------------------------------------

    pub async fn get_me(&self) -> Result<User, Error> {
        let d = self.deadline;
        d.unary(self.users().get_me(d.request(GetMeRequest {})))
            .await
    }

    pub async fn resolve_phone(&self, phone: &str) -> Result<User, Error> {
        let d = self.deadline;
        d.unary(self.users().resolve_phone(d.request(ResolvePhoneRequest {
            phone: phone.to_owned(),
        })))
        .await
    }

    pub async fn resolve_username(&self, username: &str) -> Result<User, Error> {
        let d = self.deadline;
        d.unary(
            self.users()
                .resolve_username(d.request(ResolveUsernameRequest {
                    username: username.to_owned(),
                })),
        )
        .await
    }

    /// Changes the caller's names and about text (each `None` stays as it is).
    pub async fn update_profile(
        &self,
        request: UpdateProfileRequest,
    ) -> Result<ProfileChanged, Error> {
        let d = self.deadline;
        d.unary(self.users().update_profile(d.request(request)))
            .await
    }

    /// Sets the caller's username; empty removes it.
    pub async fn update_username(&self, username: &str) -> Result<ProfileChanged, Error> {
        let d = self.deadline;
        d.unary(
            self.users()
                .update_username(d.request(UpdateUsernameRequest {
                    username: username.to_owned(),
                })),
        )
        .await
    }

    pub async fn get_privacy(&self, key: i32) -> Result<PrivacyRule, Error> {
        let d = self.deadline;
        d.unary(
            self.users()
                .get_privacy(d.request(GetPrivacyRequest { key })),
        )
        .await
    }

    pub async fn set_privacy(&self, rule: PrivacyRule) -> Result<PrivacyChanged, Error> {
        let d = self.deadline;
        d.unary(self.users().set_privacy(d.request(rule))).await
    }

    // Contacts -------------------------------------------------------------------------------

    /// Imports contacts by phone: (phone, first name, last name) each.
    pub async fn import_contacts(
        &self,
        contacts: &[(&str, &str, &str)],
    ) -> Result<ImportedContacts, Error> {
        let contacts = contacts
            .iter()
            .map(|(phone, first, last)| InputContact {
                phone: (*phone).to_owned(),
                first_name: (*first).to_owned(),
                last_name: (*last).to_owned(),
            })
            .collect();
        let d = self.deadline;
        d.unary(
            self.contacts()
                .import_contacts(d.request(ImportContactsRequest { contacts })),
        )
        .await
    }

    pub async fn get_contacts(&self, request: GetContactsRequest) -> Result<ContactList, Error> {
        let d = self.deadline;
        d.unary(self.contacts().get_contacts(d.request(request)))
            .await
    }

    pub async fn delete_contacts(&self, user_ids: &[i64]) -> Result<ContactsChanged, Error> {
        let d = self.deadline;
        d.unary(
            self.contacts()
                .delete_contacts(d.request(DeleteContactsRequest {
                    user_ids: user_ids.to_vec(),
                })),
        )
        .await
    }

    // Messages -------------------------------------------------------------------------------

    /// Sends a message: one round trip. The answer's `pts`, when not 0, is this device's own
    /// update; hand it to the update stream ([`crate::SentUpdates`]) or a
    /// [`crate::Sequencer`] with [`crate::sent_update`].
    pub async fn send_message(
        &self,
        request: SendMessageRequest,
    ) -> Result<SendMessageResponse, Error> {
        let d = self.deadline;
        d.unary(self.messages().send_message(d.request(request)))
            .await
    }

    /// Forwards this user's messages: one round trip for all of them. Each of the answer's
    /// `sent` is the answer to one send, in request order: hand each to the update stream as
    /// a send's ([`crate::sent_update`]).
    pub async fn forward_messages(
        &self,
        request: ForwardMessagesRequest,
    ) -> Result<ForwardMessagesResponse, Error> {
        let d = self.deadline;
        d.unary(self.messages().forward_messages(d.request(request)))
            .await
    }

    /// Edits the text of one of this user's messages. The answer's `pts`, when not 0, is this
    /// device's own update ([`crate::edited_update`]).
    pub async fn edit_message(
        &self,
        request: EditMessageRequest,
    ) -> Result<EditMessageResponse, Error> {
        let d = self.deadline;
        d.unary(self.messages().edit_message(d.request(request)))
            .await
    }

    /// Deletes messages of this user's box (with `revoke`, the peer's too). The answer's `pts`,
    /// when not 0, is this device's own update ([`crate::deleted_update`]).
    pub async fn delete_messages(
        &self,
        request: DeleteMessagesRequest,
    ) -> Result<AffectedMessages, Error> {
        let d = self.deadline;
        d.unary(self.messages().delete_messages(d.request(request)))
            .await
    }

    /// Marks voice or video notes this user received as played (her box ids, at most 1000):
    /// the senders' devices learn it too. The answer's `pts_count` is 0 when nothing was
    /// unplayed; this device's own update comes by getDifference (only it says which of the
    /// ids changed).
    pub async fn read_message_contents(&self, ids: Vec<i64>) -> Result<AffectedMessages, Error> {
        let d = self.deadline;
        let request = ReadMessageContentsRequest { ids };
        d.unary(self.messages().read_message_contents(d.request(request)))
            .await
    }

    /// Sets this user's reaction to her message `msg_id` of the dialog with `peer` (an emoji,
    /// replacing her previous one), or removes it (empty). Both owners' devices get
    /// `UpdateMessageReactions`; `pts_count` 0 when it was her reaction already.
    pub async fn send_reaction(
        &self,
        peer: InputPeer,
        msg_id: i64,
        reaction: &str,
    ) -> Result<AffectedMessages, Error> {
        let d = self.deadline;
        let request = SendReactionRequest {
            peer: Some(peer),
            msg_id,
            reaction: reaction.to_owned(),
        };
        d.unary(self.messages().send_reaction(d.request(request)))
            .await
    }

    /// Marks the reactions to this user's messages of the dialog with `peer` seen: the dialog's
    /// unread reactions become 0 on every device (`UpdateReadReactions`).
    pub async fn read_reactions(&self, peer: InputPeer) -> Result<AffectedMessages, Error> {
        let d = self.deadline;
        let request = ReadReactionsRequest { peer: Some(peer) };
        d.unary(self.messages().read_reactions(d.request(request)))
            .await
    }

    /// Clears one batch (at most 1000 messages) of a dialog; call again while the answer's
    /// `offset` is above 0. This device's own updates come by getDifference.
    pub async fn delete_history(
        &self,
        request: DeleteHistoryRequest,
    ) -> Result<AffectedHistory, Error> {
        let d = self.deadline;
        d.unary(self.messages().delete_history(d.request(request)))
            .await
    }

    /// A window of a dialog's history, newest first.
    pub async fn get_history(&self, request: GetHistoryRequest) -> Result<MessagesSlice, Error> {
        let d = self.deadline;
        d.unary(self.messages().get_history(d.request(request)))
            .await
    }

    /// Marks the dialog with `peer` read up to `max_id` (0: up to its newest message).
    pub async fn read_history(
        &self,
        peer: InputPeer,
        max_id: i64,
    ) -> Result<AffectedMessages, Error> {
        let d = self.deadline;
        d.unary(self.messages().read_history(d.request(ReadHistoryRequest {
            peer: Some(peer),
            max_id,
        })))
        .await
    }

    /// Tells `peer`'s online devices what this user is doing in the chat (a transient event,
    /// never logged). Repeat it every few seconds while the action lasts; the server pushes
    /// repeats of the same action only every few seconds, and a device shows one for
    /// [`crate::Typing::timeout`] from its arrival. `CANCEL` stops it.
    pub async fn set_typing(
        &self,
        peer: InputPeer,
        action: SendMessageAction,
    ) -> Result<(), Error> {
        let d = self.deadline;
        d.unary(self.messages().set_typing(d.request(SetTypingRequest {
            peer: Some(peer),
            action: Some(action),
        })))
        .await
        .map(|_: SetTypingResponse| ())
    }

    // Account --------------------------------------------------------------------------------

    /// This user's presence: away (`offline` true, as when the app goes to the background) or
    /// back. Streams and calls keep her online by themselves.
    pub async fn update_status(&self, offline: bool) -> Result<(), Error> {
        let d = self.deadline;
        d.unary(
            self.account()
                .update_status(d.request(UpdateStatusRequest { offline })),
        )
        .await
        .map(|_: UpdateStatusResponse| ())
    }

    // Dialogs --------------------------------------------------------------------------------

    pub async fn get_dialogs(&self, request: GetDialogsRequest) -> Result<DialogsSlice, Error> {
        let d = self.deadline;
        d.unary(self.dialogs().get_dialogs(d.request(request)))
            .await
    }

    /// The dialogs with these peers (those the account has), in their order.
    pub async fn get_peer_dialogs(&self, peers: Vec<InputPeer>) -> Result<DialogsSlice, Error> {
        let d = self.deadline;
        let request = GetPeerDialogsRequest { peers };
        d.unary(self.dialogs().get_peer_dialogs(d.request(request)))
            .await
    }

    // The settings calls answer the update that logged the change: hand it to the device's
    // update stream (`UpdateStream::answer_setting`), which applies it in its pts order.

    /// Pins the dialog with `peer` at the head of its folder, or unpins it.
    pub async fn toggle_dialog_pin(
        &self,
        peer: InputPeer,
        pinned: bool,
    ) -> Result<PtsUpdate, Error> {
        let d = self.deadline;
        let request = ToggleDialogPinRequest {
            peer: Some(peer),
            pinned,
        };
        d.unary(self.dialogs().toggle_dialog_pin(d.request(request)))
            .await
    }

    /// Sets the order of a folder's pinned dialogs (with `force`, unpins the others).
    pub async fn reorder_pinned_dialogs(
        &self,
        folder_id: i32,
        order: Vec<InputPeer>,
        force: bool,
    ) -> Result<PtsUpdate, Error> {
        let d = self.deadline;
        let request = ReorderPinnedDialogsRequest {
            folder_id,
            order,
            force,
        };
        d.unary(self.dialogs().reorder_pinned_dialogs(d.request(request)))
            .await
    }

    /// Moves dialogs to folders (0 the main list, 1 the archive).
    pub async fn edit_peer_folders(
        &self,
        folder_peers: Vec<(InputPeer, i32)>,
    ) -> Result<PtsUpdate, Error> {
        let d = self.deadline;
        let request = EditPeerFoldersRequest {
            folder_peers: folder_peers
                .into_iter()
                .map(|(peer, folder_id)| InputFolderPeer {
                    peer: Some(peer),
                    folder_id,
                })
                .collect(),
        };
        d.unary(self.dialogs().edit_peer_folders(d.request(request)))
            .await
    }

    /// Marks the dialog with `peer` unread, or takes the mark away.
    pub async fn mark_dialog_unread(
        &self,
        peer: InputPeer,
        unread: bool,
    ) -> Result<PtsUpdate, Error> {
        let d = self.deadline;
        let request = MarkDialogUnreadRequest {
            peer: Some(peer),
            unread,
        };
        d.unary(self.dialogs().mark_dialog_unread(d.request(request)))
            .await
    }

    /// Sets how the dialog with `peer` notifies.
    pub async fn update_notify_settings(
        &self,
        peer: InputPeer,
        settings: PeerNotifySettings,
    ) -> Result<PtsUpdate, Error> {
        let d = self.deadline;
        let request = UpdateNotifySettingsRequest {
            peer: Some(peer),
            settings: Some(settings),
        };
        d.unary(self.dialogs().update_notify_settings(d.request(request)))
            .await
    }

    pub async fn get_notify_settings(&self, peer: InputPeer) -> Result<PeerNotifySettings, Error> {
        let d = self.deadline;
        let request = GetNotifySettingsRequest { peer: Some(peer) };
        d.unary(self.dialogs().get_notify_settings(d.request(request)))
            .await
    }

    /// Saves the draft of a dialog (empty text and no reply: clears it).
    pub async fn save_draft(&self, request: SaveDraftRequest) -> Result<PtsUpdate, Error> {
        let d = self.deadline;
        d.unary(self.dialogs().save_draft(d.request(request))).await
    }

    pub async fn get_peer_settings(&self, peer: InputPeer) -> Result<PeerSettings, Error> {
        let d = self.deadline;
        let request = GetPeerSettingsRequest { peer: Some(peer) };
        d.unary(self.dialogs().get_peer_settings(d.request(request)))
            .await
    }

    /// Hides a dialog's peer settings bar, a change of the owner's log like her other settings.
    pub async fn hide_peer_settings_bar(&self, peer: InputPeer) -> Result<PtsUpdate, Error> {
        let d = self.deadline;
        let request = HidePeerSettingsBarRequest { peer: Some(peer) };
        d.unary(self.dialogs().hide_peer_settings_bar(d.request(request)))
            .await
    }

    /// Makes or edits the dialog filter `id` (`None`: deletes it).
    pub async fn update_dialog_filter(
        &self,
        id: i32,
        filter: Option<DialogFilter>,
    ) -> Result<PtsUpdate, Error> {
        let d = self.deadline;
        let request = UpdateDialogFilterRequest { id, filter };
        d.unary(self.dialogs().update_dialog_filter(d.request(request)))
            .await
    }

    /// Orders the account's dialog filters (every id once).
    pub async fn update_dialog_filters_order(&self, order: Vec<i32>) -> Result<PtsUpdate, Error> {
        let d = self.deadline;
        let request = UpdateDialogFiltersOrderRequest { order };
        d.unary(
            self.dialogs()
                .update_dialog_filters_order(d.request(request)),
        )
        .await
    }

    /// The account's dialog filters, in its order.
    pub async fn get_dialog_filters(&self) -> Result<Vec<DialogFilter>, Error> {
        let d = self.deadline;
        let request = oxigram_proto::api::v1::GetDialogFiltersRequest {};
        let filters: DialogFilters = d
            .unary(self.dialogs().get_dialog_filters(d.request(request)))
            .await?;
        Ok(filters.filters)
    }

    // Updates --------------------------------------------------------------------------------

    /// The account's current position in its update log.
    pub async fn get_state(&self) -> Result<UpdatesState, Error> {
        let d = self.deadline;
        d.unary(self.updates().get_state(d.request(GetStateRequest {})))
            .await
    }

    /// One slice of the updates after `pts`.
    pub async fn get_difference(&self, pts: i32, limit: i32) -> Result<Difference, Error> {
        let d = self.deadline;
        d.unary(
            self.updates()
                .get_difference(d.request(GetDifferenceRequest { pts, limit })),
        )
        .await
    }

    /// Opens the raw update stream at `pts` (0: live updates only). The deadline bounds the
    /// opening only: a stream lives as long as it is read. [`crate::UpdateStream`] adds the
    /// ordering, the catch-up and the reconnection.
    pub async fn open_stream(&self, pts: i32) -> Result<Streaming<StreamEvent>, Error> {
        let mut updates = self.updates();
        let opening = updates.stream(StreamRequest { pts });
        Ok(self.deadline.bound(opening).await??.into_inner())
    }

    /// Every slice of the difference after `pts` and the pts they end at, as the gateway sent
    /// them. A difference too long to replay is an error here.
    pub async fn full_difference(&self, pts: i32) -> Result<(Vec<Difference>, i32), Error> {
        let mut slices = Vec::new();
        let end = self
            .each_slice(pts, |slice| {
                let next = slice.state.as_ref().ok_or(Error::Missing("state"))?.pts;
                if slice.too_long {
                    return Err(Error::DifferenceTooLong { pts: next });
                }
                slices.push(slice);
                Ok(next)
            })
            .await?;
        Ok((slices, end))
    }

    /// getDifference from `pts`, slice after slice, until one is not a slice; `take` consumes
    /// each and says which pts the next one starts from.
    pub(crate) async fn each_slice(
        &self,
        mut pts: i32,
        mut take: impl FnMut(Difference) -> Result<i32, Error>,
    ) -> Result<i32, Error> {
        loop {
            let slice = self.get_difference(pts, DIFFERENCE_LIMIT).await?;
            let more = slice.is_slice && !slice.too_long;
            let next = take(slice)?;
            if !more {
                return Ok(next);
            }
            if next <= pts {
                return Err(Error::DifferenceStalled { pts });
            }
            pts = next;
        }
    }
}
