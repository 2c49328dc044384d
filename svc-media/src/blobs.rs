//! Blob storage through `object_store`: local files by default, any S3-compatible store by
//! configuration (`[media.s3]`, credentials from the environment). Every blob is written once,
//! under a key of its own, and only deleted afterwards: an uploaded part is a blob, and a
//! completed upload's parts stay where they are as the blobs of its content (svc-media's
//! `content_blobs` says which bytes of a content each holds), so each uploaded byte is written
//! once and a download is a ranged read of the one or few blobs its window spans. A content
//! the server makes (a photo's size, a thumbnail) is one blob. No call holds a whole file in
//! memory: a blob is at most a part (512 KiB) or a made image (10 MiB at most).

use std::sync::Arc;

use bytes::Bytes;
use object_store::{
    ObjectStore, ObjectStoreExt, PutPayload, aws::AmazonS3Builder, local::LocalFileSystem,
    path::Path,
};
use oxigram_kit::config::{MediaConfig, S3Config};

/// A blob store's failure.
pub type BlobError = object_store::Error;

/// The blob store of svc-media.
#[derive(Clone)]
pub struct Blobs {
    store: Arc<dyn ObjectStore>,
}

impl Blobs {
    /// Blobs as files under `root` (created when missing).
    pub fn local(root: impl AsRef<std::path::Path>) -> anyhow::Result<Self> {
        std::fs::create_dir_all(root.as_ref())?;
        let store = LocalFileSystem::new_with_prefix(root)?.with_automatic_cleanup(true);
        Ok(Self {
            store: Arc::new(store),
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
        // `multipart_chunk_mib` is no longer used: nothing is assembled by a multipart upload.
        Ok(Self {
            store: Arc::new(builder.build()?),
        })
    }

    /// Stores `bytes` under `key`: a fresh key of the caller's (no blob is ever written twice).
    pub async fn put(&self, key: &str, bytes: impl Into<Bytes>) -> Result<(), BlobError> {
        self.store
            .put(&Path::from(key), PutPayload::from(bytes.into()))
            .await?;
        Ok(())
    }

    /// The bytes of `key` in `start..end` (the caller keeps `end` within the blob).
    pub async fn read_range(&self, key: &str, start: u64, end: u64) -> Result<Bytes, BlobError> {
        if end <= start {
            return Ok(Bytes::new());
        }
        self.store.get_range(&Path::from(key), start..end).await
    }

    /// The whole blob `key`, for small ones only (a part to hash, an image to make sizes of).
    pub async fn read_all(&self, key: &str) -> Result<Bytes, BlobError> {
        self.store.get(&Path::from(key)).await?.bytes().await
    }

    /// Deletes `key`; a key that is not there is no error.
    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        match self.store.delete(&Path::from(key)).await {
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            other => other,
        }
    }
}
