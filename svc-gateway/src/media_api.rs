//! The client's Media service: svc-media's calls, with the owner set to the caller's user,
//! and two that need svc-messages too. A download of a message's file is granted by the
//! message: svc-messages says whether the caller's box holds it (and her file reference is
//! good), then svc-media reads the range by content; no service reads another's schema.
//! Instant upload asks svc-media first (the caller's own files), then svc-messages (media of
//! a message she holds), and answers both refusals alike.

use std::sync::Arc;

use oxigram_errors::{ErrorCode, code_of, forward, status};
use oxigram_proto::{
    api::v1::{
        CompleteUploadRequest, File, FileChunk, GetFileRequest, GetMessageFileRequest,
        SaveFilePartRequest, SaveFilePartResponse, UploadByHashRequest, media_server::Media,
    },
    media::v1 as media_svc,
    messages::v1 as messages_svc,
    require_peer,
    types::v1::{InputMedia, MessageMedia},
};
use tonic::{Request, Response, Status};

use crate::{Gateway, acting::Acting};

pub struct MediaApi(pub Arc<Gateway>);

impl Gateway {
    /// The snapshot of the caller's upload that a message of hers will carry (svc-media
    /// checks the file is hers and makes a photo's sizes).
    pub async fn resolve_media(
        &self,
        owner_id: i64,
        media: Option<InputMedia>,
    ) -> Result<MessageMedia, Status> {
        let request = media_svc::ResolveMediaRequest { owner_id, media };
        let resolved = self.media.clone().resolve_media(request).await;
        Ok(resolved.map_err(forward)?.into_inner())
    }
}

#[tonic::async_trait]
impl Media for MediaApi {
    async fn save_file_part(
        &self,
        request: Request<SaveFilePartRequest>,
    ) -> Result<Response<SaveFilePartResponse>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let limits = &self.0.limits;
        limits
            .check(
                &limits.upload_parts_per_user,
                me.user_id,
                "too many file parts",
            )
            .await?;
        let request = media_svc::SaveFilePartRequest::acting(me, request);
        self.0
            .media
            .clone()
            .save_file_part(request)
            .await
            .map_err(forward)
    }

    async fn complete_upload(
        &self,
        request: Request<CompleteUploadRequest>,
    ) -> Result<Response<File>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let request = media_svc::CompleteUploadRequest::acting(me, request);
        self.0
            .media
            .clone()
            .complete_upload(request)
            .await
            .map_err(forward)
    }

    async fn get_file(
        &self,
        request: Request<GetFileRequest>,
    ) -> Result<Response<FileChunk>, Status> {
        let (me, request) = self.0.signed_in(request).await?;
        let request = media_svc::GetFileRequest::acting(me, request);
        self.0
            .media
            .clone()
            .get_file(request)
            .await
            .map_err(forward)
    }

    async fn get_message_file(
        &self,
        request: Request<GetMessageFileRequest>,
    ) -> Result<Response<FileChunk>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        let peer = require_peer(r.peer.as_ref(), me.user_id)?;
        let of_message = messages_svc::MediaOfMessageRequest {
            owner_id: me.user_id,
            peer: Some(oxigram_proto::types::v1::InputPeer::user(peer)),
            msg_id: r.msg_id,
            file_reference: r.file_reference,
        };
        let media = self
            .0
            .messages
            .clone()
            .media_of_message(of_message)
            .await
            .map_err(forward)?
            .into_inner();
        let file_id = match r.thumb_size.as_str() {
            "" => media.file_id,
            size => media
                .sizes
                .iter()
                .find(|s| s.r#type == size)
                .map(|s| s.file_id)
                .ok_or_else(|| {
                    status(
                        ErrorCode::FileReferenceInvalid,
                        "the message's file has no such size",
                    )
                })?,
        };
        let read = media_svc::ReadContentRequest {
            file_id,
            offset: r.offset,
            limit: r.limit,
        };
        self.0
            .media
            .clone()
            .read_content(read)
            .await
            .map_err(forward)
    }

    async fn upload_by_hash(
        &self,
        request: Request<UploadByHashRequest>,
    ) -> Result<Response<File>, Status> {
        let (me, r) = self.0.signed_in(request).await?;
        // A hash probe costs what a part does: it stands for one, and bounds probing.
        let limits = &self.0.limits;
        limits
            .check(
                &limits.upload_parts_per_user,
                me.user_id,
                "too many file parts",
            )
            .await?;
        let ask = |visible| media_svc::UploadByHashRequest {
            owner_id: me.user_id,
            request: Some(r.clone()),
            visible,
        };
        // Her own files first: no question to svc-messages.
        let refused = match self.0.media.clone().upload_by_hash(ask(false)).await {
            Ok(file) => return Ok(file),
            Err(refused) => refused,
        };
        if code_of(&refused).as_deref() != Some("FILE_HASH_UNKNOWN") {
            return Err(forward(refused));
        }
        let holds = self
            .0
            .messages
            .clone()
            .holds_content(messages_svc::HoldsContentRequest {
                owner_id: me.user_id,
                sha256: r.sha256.clone(),
            })
            .await
            .map_err(forward)?
            .into_inner()
            .holds;
        if !holds {
            return Err(forward(refused));
        }
        self.0
            .media
            .clone()
            .upload_by_hash(ask(true))
            .await
            .map_err(forward)
    }
}
