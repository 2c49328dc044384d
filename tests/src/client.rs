//! A test device: one auth key talking to the gateway, with the client-side rules of the log
//! (apply only contiguous pts; fill gaps with getDifference).

use anyhow::Context;
use oxictl::device::Api;
use oxigram_proto::{
    api::v1::{
        CreateAuthKeyRequest, DialogsSlice, Difference, GetDialogsRequest, GetDifferenceRequest,
        GetHistoryRequest, SendCodeRequest, SendMessageRequest, SendMessageResponse, SignInRequest,
        SignUpRequest, StreamEvent, StreamRequest, auth_client::AuthClient, stream_event,
    },
    types::v1::{Message, PtsUpdate, User, update},
};
use tonic::{Status, Streaming, transport::Endpoint};

use crate::LOGIN_CODE;

pub struct TestClient {
    api: Api,
    pub auth_key_id: i64,
    pub user: Option<User>,
}

impl std::ops::Deref for TestClient {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.api
    }
}

impl TestClient {
    /// A new device: creates its auth key.
    pub async fn new(gateway: &str) -> anyhow::Result<Self> {
        let channel = Endpoint::from_shared(gateway.to_owned())?.connect().await?;
        let key = AuthClient::new(channel.clone())
            .create_auth_key(CreateAuthKeyRequest {
                device_model: "test".into(),
            })
            .await?
            .into_inner();
        Ok(Self {
            api: Api::new(channel, key.auth_key_id, &key.secret)?,
            auth_key_id: key.auth_key_id,
            user: None,
        })
    }

    pub fn user_id(&self) -> anyhow::Result<i64> {
        Ok(self.user.as_ref().context("not signed in")?.id)
    }

    /// Signs this device up as a new user.
    pub async fn sign_up(&mut self, phone: &str, name: &str) -> anyhow::Result<User> {
        let hash = self
            .auth()
            .send_code(SendCodeRequest {
                phone: phone.into(),
            })
            .await?
            .into_inner()
            .phone_code_hash;
        let user = self
            .auth()
            .sign_up(SignUpRequest {
                phone: phone.into(),
                phone_code_hash: hash,
                code: LOGIN_CODE.into(),
                first_name: name.into(),
            })
            .await?
            .into_inner()
            .user
            .context("no user")?;
        self.user = Some(user.clone());
        Ok(user)
    }

    /// Signs this device in to an existing user.
    pub async fn sign_in(&mut self, phone: &str) -> anyhow::Result<User> {
        let hash = self
            .auth()
            .send_code(SendCodeRequest {
                phone: phone.into(),
            })
            .await?
            .into_inner()
            .phone_code_hash;
        let user = self
            .auth()
            .sign_in(SignInRequest {
                phone: phone.into(),
                phone_code_hash: hash,
                code: LOGIN_CODE.into(),
            })
            .await?
            .into_inner()
            .user
            .context("no user")?;
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
            .messages()
            .send_message(SendMessageRequest {
                peer_user_id: peer,
                random_id,
                text: text.into(),
                ..Default::default()
            })
            .await?
            .into_inner())
    }

    pub async fn difference(&self, pts: i32) -> Result<Difference, Status> {
        Ok(self
            .updates()
            .get_difference(GetDifferenceRequest { pts, limit: 100 })
            .await?
            .into_inner())
    }

    pub async fn stream(&self, pts: i32) -> Result<Streaming<StreamEvent>, Status> {
        Ok(self
            .updates()
            .stream(StreamRequest { pts })
            .await?
            .into_inner())
    }

    pub async fn dialogs_page(&self) -> Result<DialogsSlice, Status> {
        Ok(self
            .dialogs()
            .get_dialogs(GetDialogsRequest {
                limit: 100,
                ..Default::default()
            })
            .await?
            .into_inner())
    }

    pub async fn history(&self, peer: i64) -> Result<Vec<Message>, Status> {
        Ok(self
            .messages()
            .get_history(GetHistoryRequest {
                peer_user_id: peer,
                limit: 100,
                ..Default::default()
            })
            .await?
            .into_inner()
            .messages)
    }

    /// Every update after `pts`, following slices; returns the slices and the final pts.
    pub async fn full_difference(&self, mut pts: i32) -> anyhow::Result<(Vec<Difference>, i32)> {
        let mut slices = Vec::new();
        loop {
            let d = self.difference(pts).await?;
            let state = d.state.as_ref().context("no state")?.pts;
            let more = d.is_slice;
            anyhow::ensure!(!d.too_long, "difference too long");
            slices.push(d);
            pts = state;
            if !more {
                return Ok((slices, pts));
            }
        }
    }
}

/// The stable error code of a status.
pub use oxigram_errors::code_of as code;

/// The next update on a device's stream, within 15 s.
pub async fn next_update(stream: &mut Streaming<StreamEvent>) -> anyhow::Result<PtsUpdate> {
    let event = tokio::time::timeout(std::time::Duration::from_secs(15), stream.message())
        .await
        .context("no update on the stream within 15 s")??
        .context("the stream ended")?;
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
