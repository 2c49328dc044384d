//! Blob storage through `object_store`: local files by default, any S3-compatible store by
//! configuration (`[media.s3]`, credentials from the environment). Uploaded parts are small
//! objects; a file is assembled from its parts by a multipart upload, one part read at a time,
//! so neither assembly nor a ranged read ever holds a whole file in memory.

use std::sync::Arc;

use object_store::{
    ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart, aws::AmazonS3Builder,
    local::LocalFileSystem, path::Path,
};
use oxigram_kit::config::{MediaConfig, S3Config};
use sha2::{Digest, Sha256};

/// A blob store's failure.
pub type BlobError = object_store::Error;

/// Smallest chunk of a multipart upload that S3 accepts (but the last).
pub const MIN_MULTIPART_CHUNK: usize = 5 * 1024 * 1024;
/// Chunks of one assembly in flight at once: with the chunk being filled, what an assembly
/// holds in memory is at most `(IN_FLIGHT + 1) × chunk` plus one part.
const IN_FLIGHT: usize = 2;

/// The blob store of svc-media.
#[derive(Clone)]
pub struct Blobs {
    store: Arc<dyn ObjectStore>,
    /// The size of one multipart chunk of an assembly.
    chunk: usize,
}

impl Blobs {
    /// Blobs as files under `root` (created when missing).
    pub fn local(root: impl AsRef<std::path::Path>) -> anyhow::Result<Self> {
        std::fs::create_dir_all(root.as_ref())?;
        let store = LocalFileSystem::new_with_prefix(root)?.with_automatic_cleanup(true);
        Ok(Self {
            store: Arc::new(store),
            chunk: MIN_MULTIPART_CHUNK,
        })
    }

    /// The store `config` names: its S3 bucket when one is set, else local files.
    pub fn from_config(config: &MediaConfig) -> anyhow::Result<Self> {
        match config.s3.bucket.is_empty() {
            true => Self::local(&config.blob_dir),
            false => Self::s3(&config.s3, None),
        }
    }

    /// An S3-compatible store, with the environment's credentials unless `keys` (access key
    /// id, secret) are given (a test's own server).
    pub fn s3(s3: &S3Config, keys: Option<(&str, &str)>) -> anyhow::Result<Self> {
        // TLS to the store goes through rustls with ring; a provider installed before (by
        // another part of the process) is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, or a
        // container's role) come from the environment, never from the configuration file.
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&s3.bucket)
            .with_region(&s3.region)
            .with_allow_http(s3.allow_http);
        if !s3.endpoint.is_empty() {
            builder = builder.with_endpoint(&s3.endpoint);
        }
        if let Some((id, secret)) = keys {
            builder = builder
                .with_access_key_id(id)
                .with_secret_access_key(secret);
        }
        Ok(Self {
            store: Arc::new(builder.build()?),
            chunk: (s3.multipart_chunk_mib.max(5) as usize) * 1024 * 1024,
        })
    }

    /// Stores `bytes` under `key`, replacing what was there.
    pub async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), BlobError> {
        self.store
            .put(&Path::from(key), PutPayload::from(bytes))
            .await?;
        Ok(())
    }

    /// The bytes of `key` in `start..end` (the caller keeps `end` within the blob).
    pub async fn read_range(&self, key: &str, start: u64, end: u64) -> Result<Vec<u8>, BlobError> {
        if end <= start {
            return Ok(vec![]);
        }
        let bytes = self.store.get_range(&Path::from(key), start..end).await?;
        Ok(bytes.to_vec())
    }

    /// The whole blob `key`, for small ones only (a part, an image to make sizes of).
    pub async fn read_all(&self, key: &str) -> Result<Vec<u8>, BlobError> {
        let got = self.store.get(&Path::from(key)).await?;
        Ok(got.bytes().await?.to_vec())
    }

    /// Concatenates `parts` into `dest` by a multipart upload, reading one part at a time;
    /// returns the size and the SHA-256 (hex) of the result. On failure the upload is
    /// aborted and nothing is left under `dest`.
    pub async fn compose(&self, parts: &[String], dest: &str) -> Result<(u64, String), BlobError> {
        let upload = self.store.put_multipart(&Path::from(dest)).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, self.chunk);
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        for part in parts {
            let bytes = match self.read_all(part).await {
                Ok(bytes) => bytes,
                Err(err) => {
                    let _ = writer.abort().await;
                    return Err(err);
                }
            };
            hasher.update(&bytes);
            size += bytes.len() as u64;
            if let Err(err) = writer.wait_for_capacity(IN_FLIGHT).await {
                let _ = writer.abort().await;
                return Err(err);
            }
            writer.write(&bytes);
        }
        writer.finish().await?;
        Ok((size, hex::encode(hasher.finalize())))
    }

    /// Deletes `key`; a key that is not there is no error.
    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        match self.store.delete(&Path::from(key)).await {
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            other => other,
        }
    }
}
