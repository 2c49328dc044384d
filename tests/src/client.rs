//! A test device: an `oxigram_client::Client` with the conveniences the suites use (the fixed
//! login code, answers as statuses, waiting for the next update).

use anyhow::Context;
use oxigram_client::Client;
use oxigram_proto::{
    api::v1::{
        AffectedHistory, AffectedMessages, DeleteHistoryRequest, DeleteMessagesRequest,
        DialogsSlice, Difference, EditMessageRequest, EditMessageResponse, ForwardMessagesRequest,
        GetDialogsRequest, GetHistoryRequest, SendMessageRequest, SendMessageResponse, StreamEvent,
        media_client::MediaClient, stream_event,
    },
    types::v1::{
        CompleteUploadRequest, Dialog, File, InputPeer, Message, PtsUpdate, SaveFilePartRequest,
        User, update,
    },
};
use tonic::{Status, Streaming};

use crate::LOGIN_CODE;

pub struct TestClient {
    client: Client,
    pub auth_key_id: i64,
    pub user: Option<User>,
}

impl std::ops::Deref for TestClient {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl TestClient {
    /// A new device: creates its auth key.
    pub async fn new(gateway: &str) -> anyhow::Result<Self> {
        let channel = oxigram_client::connect(gateway).await?;
        let client = Client::create(channel, "test").await?;
        Ok(Self {
            auth_key_id: client.auth_key().id,
            client,
            user: None,
        })
    }

    pub fn user_id(&self) -> anyhow::Result<i64> {
        Ok(self.user.as_ref().context("not signed in")?.id)
    }

    /// Signs this device up as a new user.
    pub async fn sign_up(&mut self, phone: &str, name: &str) -> anyhow::Result<User> {
        let login = self.client.request_code(phone).await?;
        let user = self.client.sign_up(&login, LOGIN_CODE, name).await?;
        self.user = Some(user.clone());
        Ok(user)
    }

    /// Signs this device in to an existing user.
    pub async fn sign_in(&mut self, phone: &str) -> anyhow::Result<User> {
        let login = self.client.request_code(phone).await?;
        let user = self.client.sign_in(&login, LOGIN_CODE).await?;
        self.user = Some(user.clone());
        Ok(user)
    }

    pub async fn send(
        &self,
        peer: i64,
        random_id: i64,
        text: &str,
    ) -> Result<SendMessageResponse, Status> {
        Ok(self
            .client
            .send_message(SendMessageRequest {
                peer: Some(InputPeer::user(peer)),
                random_id,
                text: text.into(),
                ..Default::default()
            })
            .await?)
    }

    /// Uploads `bytes` in parts of 512 KiB as this device's upload `upload_id`.
    pub async fn upload(&self, upload_id: i64, bytes: &[u8], name: &str) -> anyhow::Result<File> {
        let mut media = MediaClient::new(self.channel());
        let parts: Vec<&[u8]> = bytes.chunks(512 * 1024).collect();
        for (p, chunk) in parts.iter().enumerate() {
            media
                .save_file_part(SaveFilePartRequest {
                    file_id: upload_id,
                    part: i32::try_from(p)?,
                    bytes: bytes::Bytes::copy_from_slice(chunk),
                })
                .await?;
        }
        Ok(media
            .complete_upload(CompleteUploadRequest {
                file_id: upload_id,
                parts: i32::try_from(parts.len())?,
                name: name.into(),
            })
            .await?
            .into_inner())
    }

    /// Edits the text of this user's message `id` (her box id) in the dialog with `peer`.
    pub async fn edit(
        &self,
        peer: i64,
        id: i64,
        text: &str,
    ) -> Result<EditMessageResponse, Status> {
        Ok(self
            .client
            .edit_message(EditMessageRequest {
                peer: Some(InputPeer::user(peer)),
                id,
                text: text.into(),
                ..Default::default()
            })
            .await?)
    }

    /// Forwards as this user; the answer to each forward, in request order.
    pub async fn forward(
        &self,
        request: ForwardMessagesRequest,
    ) -> Result<Vec<SendMessageResponse>, Status> {
        Ok(self.client.forward_messages(request).await?.sent)
    }

    /// Deletes this user's messages `ids` (her box ids); with `revoke` the peer's too.
    pub async fn delete(&self, ids: &[i64], revoke: bool) -> Result<AffectedMessages, Status> {
        Ok(self
            .client
            .delete_messages(DeleteMessagesRequest {
                ids: ids.to_vec(),
                revoke,
            })
            .await?)
    }

    /// One batch of a clear of the dialog with `peer` (`None`: no peer named).
    pub async fn clear_batch(
        &self,
        peer: Option<InputPeer>,
        max_id: i64,
        just_clear: bool,
        revoke: bool,
    ) -> Result<AffectedHistory, Status> {
        Ok(self
            .client
            .delete_history(DeleteHistoryRequest {
                peer,
                max_id,
                just_clear,
                revoke,
            })
            .await?)
    }

    /// Clears the dialog with `peer` batch after batch, as a client does while the answer's
    /// offset is above 0; returns each batch's answer.
    pub async fn clear(
        &self,
        peer: i64,
        just_clear: bool,
        revoke: bool,
    ) -> Result<Vec<AffectedHistory>, Status> {
        let mut batches = Vec::new();
        loop {
            let batch = self
                .clear_batch(Some(InputPeer::user(peer)), 0, just_clear, revoke)
                .await?;
            let more = batch.offset > 0;
            batches.push(batch);
            if !more {
                return Ok(batches);
            }
        }
    }

    pub async fn difference(&self, pts: i32) -> Result<Difference, Status> {
        Ok(self
            .client
            .get_difference(pts, oxigram_client::DIFFERENCE_LIMIT)
            .await?)
    }

    pub async fn stream(&self, pts: i32) -> Result<Streaming<StreamEvent>, Status> {
        Ok(self.client.open_stream(pts).await?)
    }

    pub async fn dialogs_page(&self) -> Result<DialogsSlice, Status> {
        Ok(self
            .client
            .get_dialogs(GetDialogsRequest {
                limit: 100,
                ..Default::default()
            })
            .await?)
    }

    pub async fn history(&self, peer: i64) -> Result<Vec<Message>, Status> {
        Ok(self
            .client
            .get_history(GetHistoryRequest {
                peer: Some(InputPeer::user(peer)),
                limit: 100,
                ..Default::default()
            })
            .await?
            .messages)
    }

    /// Every update after `pts`, following slices; returns the slices and the final pts.
    pub async fn full_difference(&self, pts: i32) -> anyhow::Result<(Vec<Difference>, i32)> {
        Ok(self.client.full_difference(pts).await?)
    }
}

/// `device`'s dialog with `peer`, once it satisfies `ok` (`None`: the dialog is not listed),
/// polled for up to 10 s: dialogs are a projection of the log and follow it.
pub async fn dialog_when(
    device: &TestClient,
    peer: i64,
    what: &str,
    ok: impl Fn(Option<&Dialog>) -> bool,
) -> anyhow::Result<Option<Dialog>> {
    crate::eventually(std::time::Duration::from_secs(10), what, || async {
        let page = device.dialogs_page().await?;
        let dialog = page.dialogs.into_iter().find(|d| d.peer_user() == peer);
        Ok(ok(dialog.as_ref()).then_some(dialog))
    })
    .await
}

/// `device`'s message `id` of its dialog with `peer`, as history shows it now.
pub async fn in_history(device: &TestClient, peer: i64, id: i64) -> anyhow::Result<Message> {
    device
        .history(peer)
        .await?
        .into_iter()
        .find(|m| m.id == id)
        .with_context(|| format!("message {id} is not in the history"))
}

/// The stable error code of a status.
pub use oxigram_errors::code_of as code;

/// Whether a stream event is transient (typing, presence): outside the update log.
pub fn is_transient(event: &StreamEvent) -> bool {
    matches!(
        event.kind,
        Some(stream_event::Kind::UserTyping(_) | stream_event::Kind::UserStatus(_))
    )
}

/// The next event of the update log (an update, or `difference_needed`) on a device's raw
/// stream, within `within`; transient events (typing, presence) and the replay's end marker
/// (`caught_up`) before it are skipped.
pub async fn next_logged(
    stream: &mut Streaming<StreamEvent>,
    within: std::time::Duration,
) -> anyhow::Result<StreamEvent> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let event = tokio::time::timeout_at(deadline, stream.message())
            .await
            .with_context(|| format!("nothing on the stream within {within:?}"))??
            .context("the stream ended")?;
        // The replay's end marker is not an event of the log either.
        let caught_up = matches!(event.kind, Some(stream_event::Kind::CaughtUp(_)));
        if !is_transient(&event) && !caught_up {
            return Ok(event);
        }
    }
}

/// The next update on a device's stream, within 15 s (transient events are skipped).
pub async fn next_update(stream: &mut Streaming<StreamEvent>) -> anyhow::Result<PtsUpdate> {
    let event = next_logged(stream, std::time::Duration::from_secs(15)).await?;
    match event.kind {
        Some(stream_event::Kind::Update(u)) => Ok(u),
        other => anyhow::bail!("expected an update, got {other:?}"),
    }
}

/// Skips updates until `pick` takes one.
pub async fn next_update_where<T>(
    stream: &mut Streaming<StreamEvent>,
    pick: impl Fn(update::Kind) -> Option<T>,
) -> anyhow::Result<T> {
    loop {
        if let Some(picked) = next_update(stream)
            .await?
            .update
            .and_then(|u| u.kind)
            .and_then(&pick)
        {
            return Ok(picked);
        }
    }
}
