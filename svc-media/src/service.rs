//! The Media gRPC service.

use oxigram_errors::{Error, ErrorCode, check_text, status};
use oxigram_proto::{
    media::v1::{CompleteUploadRequest, GetFileRequest, SaveFilePartRequest, media_server::Media},
    types::v1::{File, FileChunk, SaveFilePartResponse},
};
use sqlx::PgPool;
use tonic::{Request, Response, Status};

use crate::{blobs::BlobStore, store};

/// Largest part, in bytes.
pub const MAX_PART_BYTES: usize = 512 * 1024;
/// Most parts one file may have.
pub const MAX_PARTS: i32 = 4000;
/// Largest download chunk, in bytes.
pub const MAX_CHUNK_BYTES: i32 = 1024 * 1024;

pub struct MediaService<B> {
    pool: PgPool,
    blobs: B,
}

impl<B: BlobStore> MediaService<B> {
    pub fn new(pool: PgPool, blobs: B) -> Self {
        Self { pool, blobs }
    }
}

fn io(err: std::io::Error) -> Status {
    Error::internal(err).into()
}

fn part_key(owner: i64, file_id: i64, part: i32) -> String {
    format!("parts/{owner}/{file_id}/{part}")
}

#[tonic::async_trait]
impl<B: BlobStore> Media for MediaService<B> {
    async fn save_file_part(
        &self,
        request: Request<SaveFilePartRequest>,
    ) -> Result<Response<SaveFilePartResponse>, Status> {
        let SaveFilePartRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        if r.file_id == 0 {
            return Err(status(ErrorCode::FileIdInvalid, "file_id must not be 0"));
        }
        if !(0..MAX_PARTS).contains(&r.part) {
            return Err(status(
                ErrorCode::FilePartInvalid,
                "part must be within 0..4000",
            ));
        }
        if r.bytes.is_empty() {
            return Err(status(
                ErrorCode::FilePartInvalid,
                "a part has at least one byte",
            ));
        }
        if r.bytes.len() > MAX_PART_BYTES {
            return Err(status(
                ErrorCode::FilePartTooBig,
                "a part is at most 512 KiB",
            ));
        }
        self.blobs
            .put(&part_key(owner_id, r.file_id, r.part), &r.bytes)
            .await
            .map_err(io)?;
        store::save_part(
            &self.pool,
            owner_id,
            r.file_id,
            r.part,
            r.bytes.len() as i32,
        )
        .await
        .map_err(Error::from)?;
        Ok(Response::new(SaveFilePartResponse {}))
    }

    async fn complete_upload(
        &self,
        request: Request<CompleteUploadRequest>,
    ) -> Result<Response<File>, Status> {
        let CompleteUploadRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        check_text("name", &r.name)?;
        if !(1..=MAX_PARTS).contains(&r.parts) {
            return Err(status(
                ErrorCode::FilePartsInvalid,
                "parts must be within 1..=4000",
            ));
        }
        let name: String = r.name.chars().take(255).collect();
        let stored = store::stored_parts(&self.pool, owner_id, r.file_id)
            .await
            .map_err(Error::from)?;
        if stored.len() != r.parts as usize
            || stored.iter().enumerate().any(|(i, p)| *p != i as i32)
        {
            return Err(status(
                ErrorCode::FilePartMissing,
                "not every part 0..parts was uploaded",
            ));
        }
        let keys: Vec<String> = stored
            .iter()
            .map(|p| part_key(owner_id, r.file_id, *p))
            .collect();
        let tmp = format!("tmp/{}", uuid::Uuid::new_v4());
        let (size, sha256) = self.blobs.compose(&keys, &tmp).await.map_err(io)?;
        let mut tx = self.pool.begin().await.map_err(Error::from)?;
        // The same content is stored once.
        let existing = store::file_by_sha256(&mut tx, &sha256)
            .await
            .map_err(Error::from)?;
        let file_id = match existing {
            Some(id) => {
                self.blobs.delete(&tmp).await.map_err(io)?;
                id
            }
            None => {
                self.blobs
                    .rename(&tmp, &format!("blobs/{sha256}"))
                    .await
                    .map_err(io)?;
                store::insert_file(&mut tx, &sha256, size as i64)
                    .await
                    .map_err(Error::from)?
            }
        };
        let ref_id = store::insert_file_ref(&mut tx, owner_id, file_id, &name)
            .await
            .map_err(Error::from)?;
        store::delete_parts(&mut tx, owner_id, r.file_id)
            .await
            .map_err(Error::from)?;
        tx.commit().await.map_err(Error::from)?;
        for key in &keys {
            if let Err(err) = self.blobs.delete(key).await {
                tracing::warn!(error = %err, key, "could not delete an uploaded part");
            }
        }
        Ok(Response::new(File {
            id: ref_id,
            size: size as i64,
            sha256,
            name,
        }))
    }

    async fn get_file(
        &self,
        request: Request<GetFileRequest>,
    ) -> Result<Response<FileChunk>, Status> {
        let GetFileRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        if r.offset < 0 {
            return Err(status(
                ErrorCode::OffsetInvalid,
                "offset must not be negative",
            ));
        }
        if !(1..=MAX_CHUNK_BYTES).contains(&r.limit) {
            return Err(status(
                ErrorCode::LimitInvalid,
                "limit must be within 1..=1048576",
            ));
        }
        // The owner check is the authorization.
        let store::StoredFile { sha256, size } = store::file_of_ref(&self.pool, owner_id, r.id)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| status(ErrorCode::FileIdInvalid, "no such file"))?;
        let bytes = if r.offset >= size {
            vec![]
        } else {
            self.blobs
                .read_range(
                    &format!("blobs/{sha256}"),
                    r.offset as u64,
                    r.limit as usize,
                )
                .await
                .map_err(io)?
        };
        Ok(Response::new(FileChunk { bytes, size }))
    }
}
