//! The Media gRPC service: uploads in parts, files by content, ranged reads (by the uploader,
//! or by a reader whose right the gateway checked through a message), the snapshot a message
//! keeps of a file (a photo's sizes made here), instant upload by hash, and the collector.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use oxigram_errors::{Error, ErrorCode, check_text, status};
use oxigram_proto::{
    media::v1::{
        CollectGarbageRequest, CollectGarbageResponse, CompleteUploadRequest, GetFileRequest,
        ReadContentRequest, ResolveMediaRequest, SaveFilePartRequest, UploadByHashRequest,
        media_server::Media,
    },
    types::v1::{
        File, FileChunk, InputMedia, MessageMedia, PhotoSize, SaveFilePartResponse,
        message_media::Kind,
    },
};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use tonic::{Request, Response, Status};

use crate::{
    blobs::Blobs,
    running_hash::RunningHashes,
    sizes::{self, Photo},
    store::{self, StoredFile},
};

/// Largest part, in bytes.
pub const MAX_PART_BYTES: usize = 512 * 1024;
/// Most parts one file may have: with parts of 512 KiB, files up to 4000 MiB.
pub const MAX_PARTS: i32 = 8000;
/// Largest download chunk, in bytes; a chunk never crosses a multiple of it either.
pub const MAX_CHUNK_BYTES: i64 = 1024 * 1024;
/// Download offsets and limits are multiples of this.
pub const CHUNK_ALIGN: i64 = 4096;
/// Longest file name and MIME type, in characters.
const MAX_NAME_CHARS: usize = 255;
/// Longest voice-note waveform, in bytes.
const MAX_WAVEFORM_BYTES: usize = 100;
/// Rows one round of the collector takes.
const GC_BATCH: i64 = 500;

pub struct MediaService {
    pool: PgPool,
    blobs: Blobs,
    hashes: RunningHashes,
}

impl MediaService {
    pub fn new(pool: PgPool, blobs: Blobs) -> Self {
        Self {
            pool,
            blobs,
            hashes: RunningHashes::default(),
        }
    }
}

fn io(err: impl std::fmt::Display) -> Status {
    Error::internal(err).into()
}

/// A fresh key for one put of a part: a re-sent part, or the same part of a later upload with
/// the same file_id, gets a key of its own, so a put never overwrites a blob that a completion
/// is hashing or that a content holds.
fn part_key(owner: i64, file_id: i64, part: i32) -> String {
    format!("parts/{owner}/{file_id}/{part}.{}", uuid::Uuid::new_v4())
}

/// Parts read ahead of the hash while an upload completes (each at most 512 KiB).
const HASH_READ_AHEAD: usize = 4;
/// Blobs of a download window read at once (a window of 1 MiB spans two parts of 512 KiB, or
/// more of smaller parts).
const WINDOW_READS: usize = 4;
/// Attempts at storing a part whose row a completion or another re-send changes meanwhile.
const SAVE_ATTEMPTS: usize = 3;

/// A fresh key for the one blob of a content the server makes (a photo's size, a thumbnail).
fn content_key() -> String {
    format!("blobs/{}", uuid::Uuid::new_v4())
}

/// The download rules: `offset` a multiple of 4 KiB (OFFSET_INVALID); `limit` a multiple of
/// 4 KiB, at most 1 MiB, and the range not crossing a multiple of 1 MiB (LIMIT_INVALID).
pub fn check_range(offset: i64, limit: i32) -> Result<(), Status> {
    if offset < 0 || offset % CHUNK_ALIGN != 0 {
        return Err(status(
            ErrorCode::OffsetInvalid,
            "offset must be a non-negative multiple of 4096",
        ));
    }
    let limit = i64::from(limit);
    if limit <= 0 || limit % CHUNK_ALIGN != 0 || limit > MAX_CHUNK_BYTES {
        return Err(status(
            ErrorCode::LimitInvalid,
            "limit must be a multiple of 4096 within 4096..=1048576",
        ));
    }
    if offset / MAX_CHUNK_BYTES != (offset + limit - 1) / MAX_CHUNK_BYTES {
        return Err(status(
            ErrorCode::LimitInvalid,
            "offset..offset+limit must not cross a multiple of 1 MiB",
        ));
    }
    Ok(())
}

/// A client's name or MIME type: no NUL, at most 255 characters (longer ones are cut).
fn short_text(field: &str, value: &str) -> Result<String, Status> {
    check_text(field, value)?;
    Ok(value.chars().take(MAX_NAME_CHARS).collect())
}

fn media_invalid(detail: &str) -> Status {
    status(ErrorCode::MediaInvalid, detail)
}

impl MediaService {
    /// The chunk `offset..offset+limit` of `file`, after the range rules: ranged reads of the
    /// blobs the window spans, in order.
    async fn chunk(&self, file: &StoredFile, offset: i64, limit: i32) -> Result<FileChunk, Status> {
        let end = (offset + i64::from(limit)).min(file.size);
        if offset >= file.size {
            return Ok(FileChunk {
                bytes: Bytes::new(),
                size: file.size,
            });
        }
        let blobs = store::blobs_in_window(&self.pool, file.file_id, offset, end)
            .await
            .map_err(Error::from)?;
        let store = self.blobs.clone();
        let reads = blobs.into_iter().map(move |b| {
            let from = (offset.max(b.byte_offset) - b.byte_offset) as u64;
            let to = (end.min(b.byte_offset + b.size) - b.byte_offset) as u64;
            let store = store.clone();
            async move { store.read_range(&b.blob_key, from, to).await }
        });
        let reads: Vec<Bytes> = futures::stream::iter(reads)
            .buffered(WINDOW_READS)
            .try_collect()
            .await
            .map_err(io)?;
        // A window within one blob is that blob's read as it came; one spanning several is
        // their reads joined.
        let bytes = match <[Bytes; 1]>::try_from(reads) {
            Ok([one]) => one,
            Err(several) => Bytes::from(several.concat()),
        };
        // The blobs of a content cover it without a gap; a short read is a broken store.
        if bytes.len() as i64 != end - offset {
            return Err(io(format!(
                "content {} has {} bytes at {offset}..{end}",
                file.file_id,
                bytes.len()
            )));
        }
        Ok(FileChunk {
            bytes,
            size: file.size,
        })
    }

    /// Stores `bytes` as a content (once per content) and gives `owner` a reference to it,
    /// taken at once (a photo's size, a thumbnail); the content's id.
    async fn store_made(&self, owner: i64, bytes: Vec<u8>, name: &str) -> Result<i64, Status> {
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let size = bytes.len() as i64;
        let key = content_key();
        self.blobs.put(&key, bytes).await.map_err(io)?;
        let mut tx = self.pool.begin().await.map_err(Error::from)?;
        let file = store::insert_file(&mut tx, &sha256, size)
            .await
            .map_err(Error::from)?;
        // A content made as one blob stays one blob.
        if file.inserted {
            store::insert_content_blob(&mut tx, file.id, size, &key)
                .await
                .map_err(Error::from)?;
        }
        store::insert_file_ref(&mut tx, owner, file.id, name, true)
            .await
            .map_err(Error::from)?;
        tx.commit().await.map_err(Error::from)?;
        if !file.inserted {
            self.blobs.delete(&key).await.map_err(io)?;
        }
        Ok(file.id)
    }

    /// An owner's image upload, decoded (`what` names it in errors).
    async fn decode_image(&self, file: &StoredFile, what: &str) -> Result<Photo, Status> {
        if file.size > sizes::MAX_PHOTO_BYTES {
            return Err(media_invalid(&format!("{what} is larger than 10 MiB")));
        }
        let mut bytes = Vec::with_capacity(file.size as usize);
        for blob in store::blobs_in_window(&self.pool, file.file_id, 0, file.size)
            .await
            .map_err(Error::from)?
        {
            bytes.extend_from_slice(&self.blobs.read_all(&blob.blob_key).await.map_err(io)?);
        }
        let decoded = tokio::task::spawn_blocking(move || Photo::decode(&bytes))
            .await
            .map_err(io)?;
        decoded.map_err(|e| media_invalid(&format!("{what} is not an image: {}", e.0)))
    }

    /// A photo's snapshot: its sizes stored, its inline preview.
    async fn photo(
        &self,
        owner: i64,
        file: &StoredFile,
        media: &mut MessageMedia,
    ) -> Result<(), Status> {
        let photo = self.decode_image(file, "the photo").await?;
        media.w = photo.width() as i32;
        media.h = photo.height() as i32;
        media.mime_type = "image/jpeg".into();
        let (made, stripped) = tokio::task::spawn_blocking(move || {
            Ok::<_, sizes::NotAPhoto>((photo.tiers()?, photo.stripped()?))
        })
        .await
        .map_err(io)?
        .map_err(|e| media_invalid(&e.0))?;
        media.stripped_thumb = stripped;
        for size in made {
            let bytes = size.jpeg.len() as i32;
            let name = format!("{}_{}.jpg", file.sha256, size.kind);
            let file_id = self.store_made(owner, size.jpeg, &name).await?;
            media.sizes.push(PhotoSize {
                r#type: size.kind.into(),
                w: size.w as i32,
                h: size.h as i32,
                size: bytes,
                file_id,
            });
        }
        Ok(())
    }

    /// A document's thumbnail from the owner's image upload `thumb_file_id`.
    async fn thumbnail(
        &self,
        owner: i64,
        thumb_file_id: i64,
        media: &mut MessageMedia,
    ) -> Result<(), Status> {
        let thumb = store::take_ref(&self.pool, owner, thumb_file_id)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| status(ErrorCode::FileIdInvalid, "no such thumbnail file"))?;
        let image = self.decode_image(&thumb, "the thumbnail").await?;
        let (kind, side) = sizes::THUMB;
        let made = tokio::task::spawn_blocking(move || image.sized(kind, side, 85))
            .await
            .map_err(io)?
            .map_err(|e| media_invalid(&e.0))?;
        let bytes = made.jpeg.len() as i32;
        let file_id = self
            .store_made(owner, made.jpeg, &format!("{}_t.jpg", thumb.sha256))
            .await?;
        media.sizes.push(PhotoSize {
            r#type: kind.into(),
            w: made.w as i32,
            h: made.h as i32,
            size: bytes,
            file_id,
        });
        Ok(())
    }
}

/// The attributes of an InputMedia, checked, in the snapshot's shape (no file yet).
fn attributes(m: &InputMedia) -> Result<MessageMedia, Status> {
    let kind = Kind::try_from(m.kind)
        .ok()
        .filter(|k| *k != Kind::Unspecified)
        .ok_or_else(|| media_invalid("kind must be a known media kind"))?;
    if m.file_id <= 0 {
        return Err(status(ErrorCode::FileIdInvalid, "file_id must be positive"));
    }
    if m.duration < 0 || m.w < 0 || m.h < 0 {
        return Err(media_invalid("duration, w and h must not be negative"));
    }
    if m.waveform.len() > MAX_WAVEFORM_BYTES {
        return Err(media_invalid("a waveform is at most 100 bytes"));
    }
    if !m.waveform.is_empty() && kind != Kind::Voice {
        return Err(media_invalid("only a voice note has a waveform"));
    }
    let mime_type = short_text("mime_type", &m.mime_type)?;
    if kind == Kind::Document && mime_type.is_empty() {
        return Err(media_invalid("a document needs a mime_type"));
    }
    if !mime_type.is_empty() && !mime_type.contains('/') {
        return Err(media_invalid("mime_type must be type/subtype"));
    }
    if kind == Kind::Photo && m.thumb_file_id != 0 {
        return Err(media_invalid("a photo's sizes are made by the server"));
    }
    Ok(MessageMedia {
        kind: kind as i32,
        mime_type,
        file_name: short_text("file_name", &m.file_name)?,
        duration: m.duration,
        w: m.w,
        h: m.h,
        waveform: m.waveform.clone(),
        title: short_text("title", &m.title)?,
        performer: short_text("performer", &m.performer)?,
        ..MessageMedia::default()
    })
}

#[tonic::async_trait]
impl Media for MediaService {
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
                "part must be within 0..8000",
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
        let size = r.bytes.len() as i32;
        // Every put goes to a fresh key; the row then names it. A re-sent part replaces the
        // row, and the blob it replaced goes after: an upload resumes from any part.
        let key = part_key(owner_id, r.file_id, r.part);
        self.blobs.put(&key, r.bytes.clone()).await.map_err(io)?;
        let mut replaced = None;
        for attempt in 1..=SAVE_ATTEMPTS {
            if store::insert_part(&self.pool, owner_id, r.file_id, r.part, size, &key)
                .await
                .map_err(Error::from)?
            {
                break;
            }
            replaced = store::replace_part(&self.pool, owner_id, r.file_id, r.part, size, &key)
                .await
                .map_err(Error::from)?;
            if replaced.is_some() {
                break;
            }
            // A completion took the part between the two statements: the part starts the next
            // upload with this file_id.
            if attempt == SAVE_ATTEMPTS {
                let _ = self.blobs.delete(&key).await;
                return Err(io("the part's upload kept changing while it was stored"));
            }
        }
        self.hashes
            .offer(owner_id, r.file_id, r.part, &key, r.bytes);
        if let Some(old) = replaced
            && let Err(err) = self.blobs.delete(&old).await
        {
            tracing::warn!(error = %err, key = old, "could not delete a replaced part");
        }
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
                "parts must be within 1..=8000",
            ));
        }
        let name: String = r.name.chars().take(MAX_NAME_CHARS).collect();
        let stored = store::stored_parts(&self.pool, owner_id, r.file_id)
            .await
            .map_err(Error::from)?;
        if stored.len() != r.parts as usize
            || stored.iter().enumerate().any(|(i, p)| p.part != i as i32)
        {
            // The stored parts ascend, without repeats: the first missing one is the first
            // place where a part is not its own index.
            let first_missing =
                (0..r.parts).find(|p| stored.get(*p as usize).map(|s| s.part) != Some(*p));
            return Err(oxigram_errors::file_part_missing(first_missing));
        }
        // The parts hashed as they came count as far as they are the parts stored, from the
        // first on; the rest are read back to hash. Their blobs become the content's as they are.
        let (mut hasher, mut size, hashed) = match self.hashes.take(owner_id, r.file_id) {
            Some(h)
                if h.keys.len() <= stored.len()
                    && h.keys.iter().zip(&stored).all(|(k, p)| *k == p.blob_key) =>
            {
                let hashed = h.keys.len();
                (h.hasher, h.size, hashed)
            }
            _ => (Sha256::new(), 0i64, 0),
        };
        let blobs = self.blobs.clone();
        let keys: Vec<String> = stored[hashed..]
            .iter()
            .map(|p| p.blob_key.clone())
            .collect();
        let mut reads = futures::stream::iter(keys.into_iter().map(move |key| {
            let blobs = blobs.clone();
            async move { blobs.read_all(&key).await }
        }))
        .buffered(HASH_READ_AHEAD);
        while let Some(bytes) = reads.next().await {
            let bytes = bytes.map_err(io)?;
            hasher.update(&bytes);
            size += bytes.len() as i64;
        }
        drop(reads);
        let sha256 = hex::encode(hasher.finalize());
        let mut tx = self.pool.begin().await.map_err(Error::from)?;
        // The same content is stored once: a content there already keeps its blobs.
        let file = store::insert_file(&mut tx, &sha256, size)
            .await
            .map_err(Error::from)?;
        let taken = store::take_parts(&mut tx, owner_id, r.file_id, file.id, file.inserted)
            .await
            .map_err(Error::from)?;
        if taken != stored {
            // A part was re-sent while the upload completed: what was hashed is not what the
            // upload holds now. Nothing changes; completing again hashes the parts as they are.
            tx.rollback().await.map_err(Error::from)?;
            return Err(status(
                ErrorCode::FilePartsInvalid,
                "a part changed while the upload completed; complete it again",
            ));
        }
        let ref_id = store::insert_file_ref(&mut tx, owner_id, file.id, &name, false)
            .await
            .map_err(Error::from)?;
        tx.commit().await.map_err(Error::from)?;
        if !file.inserted {
            // A duplicate: its parts are not needed.
            for part in &taken {
                if let Err(err) = self.blobs.delete(&part.blob_key).await {
                    tracing::warn!(error = %err, key = part.blob_key, "could not delete a duplicate's part");
                }
            }
        }
        Ok(Response::new(File {
            id: ref_id,
            size,
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
        check_range(r.offset, r.limit)?;
        // The owner check is the authorization.
        let file = store::file_of_ref(&self.pool, owner_id, r.id)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| status(ErrorCode::FileIdInvalid, "no such file"))?;
        Ok(Response::new(self.chunk(&file, r.offset, r.limit).await?))
    }

    async fn resolve_media(
        &self,
        request: Request<ResolveMediaRequest>,
    ) -> Result<Response<MessageMedia>, Status> {
        let ResolveMediaRequest { owner_id, media } = request.into_inner();
        let input = media.ok_or_else(|| media_invalid("media is required"))?;
        let mut media = attributes(&input)?;
        let file = store::take_ref(&self.pool, owner_id, input.file_id)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| status(ErrorCode::FileIdInvalid, "no such file of yours"))?;
        media.file_id = file.file_id;
        media.size = file.size;
        media.sha256 = file.sha256.clone();
        if media.file_name.is_empty() && media.kind != Kind::Photo as i32 {
            media.file_name = file.name.clone();
        }
        if media.kind == Kind::Photo as i32 {
            self.photo(owner_id, &file, &mut media).await?;
        } else if input.thumb_file_id != 0 {
            self.thumbnail(owner_id, input.thumb_file_id, &mut media)
                .await?;
        }
        Ok(Response::new(media))
    }

    async fn read_content(
        &self,
        request: Request<ReadContentRequest>,
    ) -> Result<Response<FileChunk>, Status> {
        let r = request.into_inner();
        check_range(r.offset, r.limit)?;
        let file = store::content(&self.pool, r.file_id)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| status(ErrorCode::FileIdInvalid, "no such file"))?;
        Ok(Response::new(self.chunk(&file, r.offset, r.limit).await?))
    }

    async fn upload_by_hash(
        &self,
        request: Request<UploadByHashRequest>,
    ) -> Result<Response<File>, Status> {
        let UploadByHashRequest {
            owner_id,
            request,
            visible,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let name = short_text("name", &r.name)?;
        let unknown = || {
            status(
                ErrorCode::FileHashUnknown,
                "no file with this hash and size that you may see",
            )
        };
        // Only a well-formed hash is looked up; whether the server holds content the caller
        // may not see is never told apart from content it does not hold.
        let well_formed = r.sha256.len() == 64
            && r.sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !well_formed {
            return Err(unknown());
        }
        let file = store::owner_file_of_hash(&self.pool, owner_id, &r.sha256, visible)
            .await
            .map_err(Error::from)?
            .filter(|f| f.size == r.size)
            .ok_or_else(unknown)?;
        let mut tx = self.pool.begin().await.map_err(Error::from)?;
        let ref_id = store::insert_file_ref(&mut tx, owner_id, file.file_id, &name, false)
            .await
            .map_err(|e| match &e {
                // The content went to the collector meanwhile.
                sqlx::Error::Database(d) if d.code().as_deref() == Some("23503") => unknown(),
                _ => Error::from(e).into(),
            })?;
        tx.commit().await.map_err(Error::from)?;
        Ok(Response::new(File {
            id: ref_id,
            size: file.size,
            sha256: file.sha256,
            name,
        }))
    }

    async fn collect_garbage(
        &self,
        request: Request<CollectGarbageRequest>,
    ) -> Result<Response<CollectGarbageResponse>, Status> {
        let grace = request.into_inner().grace_seconds.max(0);
        Ok(Response::new(self.collect(grace).await?))
    }
}

impl MediaService {
    /// One collection: unfinished uploads' parts and untaken references older than
    /// `grace_seconds`, then every content left with no reference, blobs after rows.
    pub async fn collect(&self, grace_seconds: i64) -> Result<CollectGarbageResponse, Status> {
        let mut done = CollectGarbageResponse::default();
        loop {
            let parts = store::collect_parts(&self.pool, grace_seconds, GC_BATCH)
                .await
                .map_err(Error::from)?;
            for key in &parts {
                self.blobs.delete(key).await.map_err(io)?;
            }
            done.parts_deleted += parts.len() as i64;
            if (parts.len() as i64) < GC_BATCH {
                break;
            }
        }
        loop {
            let mut files = store::collect_refs(&self.pool, grace_seconds, GC_BATCH)
                .await
                .map_err(Error::from)?;
            let taken = files.len() as i64;
            files.sort_unstable();
            files.dedup();
            for file_id in files {
                // A content shared by dedupe goes only with its last reference.
                let keys = store::collect_content(&self.pool, file_id)
                    .await
                    .map_err(Error::from)?;
                // Every blob of the content: its parts, or its one blob.
                for key in &keys {
                    self.blobs.delete(key).await.map_err(io)?;
                }
                if !keys.is_empty() {
                    done.contents_deleted += 1;
                }
            }
            if taken < GC_BATCH {
                break;
            }
        }
        Ok(done)
    }
}
