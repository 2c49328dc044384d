//! The client's Media service: svc-media's calls, with the owner set to the caller's user.

use std::sync::Arc;

use oxigram_errors::forward;
use oxigram_proto::{
    api::v1::{
        CompleteUploadRequest, File, FileChunk, GetFileRequest, SaveFilePartRequest,
        SaveFilePartResponse, media_server::Media,
    },
    media::v1 as media_svc,
};
use tonic::{Request, Response, Status};

use crate::{Gateway, auth::caller};

pub struct MediaApi(pub Arc<Gateway>);

#[tonic::async_trait]
impl Media for MediaApi {
    async fn save_file_part(
        &self,
        request: Request<SaveFilePartRequest>,
    ) -> Result<Response<SaveFilePartResponse>, Status> {
        let owner_id = caller(&self.0, request.metadata()).await?.user()?;
        let r = request.into_inner();
        self.0
            .media
            .clone()
            .save_file_part(media_svc::SaveFilePartRequest {
                owner_id,
                file_id: r.file_id,
                part: r.part,
                bytes: r.bytes,
            })
            .await
            .map_err(forward)?;
        Ok(Response::new(SaveFilePartResponse {}))
    }

    async fn complete_upload(
        &self,
        request: Request<CompleteUploadRequest>,
    ) -> Result<Response<File>, Status> {
        let owner_id = caller(&self.0, request.metadata()).await?.user()?;
        let r = request.into_inner();
        let f = self
            .0
            .media
            .clone()
            .complete_upload(media_svc::CompleteUploadRequest {
                owner_id,
                file_id: r.file_id,
                parts: r.parts,
                name: r.name,
            })
            .await
            .map_err(forward)?
            .into_inner();
        Ok(Response::new(File {
            id: f.id,
            size: f.size,
            sha256: f.sha256,
            name: f.name,
        }))
    }

    async fn get_file(
        &self,
        request: Request<GetFileRequest>,
    ) -> Result<Response<FileChunk>, Status> {
        let owner_id = caller(&self.0, request.metadata()).await?.user()?;
        let r = request.into_inner();
        let c = self
            .0
            .media
            .clone()
            .get_file(media_svc::GetFileRequest {
                owner_id,
                id: r.id,
                offset: r.offset,
                limit: r.limit,
            })
            .await
            .map_err(forward)?
            .into_inner();
        Ok(Response::new(FileChunk {
            bytes: c.bytes,
            size: c.size,
        }))
    }
}
