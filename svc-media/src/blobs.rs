//! Blob storage behind a trait: local files by default. An S3-compatible store implements the
//! same four operations (put, ranged read, compose, delete).

use std::{future::Future, path::PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

pub trait BlobStore: Send + Sync + 'static {
    fn put(&self, key: &str, bytes: &[u8]) -> impl Future<Output = std::io::Result<()>> + Send;
    /// Up to `len` bytes from `offset`; fewer at the end of the blob.
    fn read_range(
        &self,
        key: &str,
        offset: u64,
        len: usize,
    ) -> impl Future<Output = std::io::Result<Vec<u8>>> + Send;
    /// Concatenates `parts` into `dest`; returns the size and the SHA-256 (hex) of the result.
    fn compose(
        &self,
        parts: &[String],
        dest: &str,
    ) -> impl Future<Output = std::io::Result<(u64, String)>> + Send;
    /// Moves a blob; the destination is replaced.
    fn rename(&self, from: &str, to: &str) -> impl Future<Output = std::io::Result<()>> + Send;
    fn delete(&self, key: &str) -> impl Future<Output = std::io::Result<()>> + Send;
}

/// Blobs as files under a root folder.
pub struct LocalBlobs {
    root: PathBuf,
}

impl LocalBlobs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    async fn parent_dirs(&self, key: &str) -> std::io::Result<PathBuf> {
        let path = self.path(key);
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir).await?;
        }
        Ok(path)
    }
}

impl BlobStore for LocalBlobs {
    async fn put(&self, key: &str, bytes: &[u8]) -> std::io::Result<()> {
        let path = self.parent_dirs(key).await?;
        tokio::fs::write(path, bytes).await
    }

    async fn read_range(&self, key: &str, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let mut file = tokio::fs::File::open(self.path(key)).await?;
        file.seek(std::io::SeekFrom::Start(offset)).await?;
        let mut buf = Vec::with_capacity(len);
        file.take(len as u64).read_to_end(&mut buf).await?;
        Ok(buf)
    }

    async fn compose(&self, parts: &[String], dest: &str) -> std::io::Result<(u64, String)> {
        let path = self.parent_dirs(dest).await?;
        let mut out = tokio::fs::File::create(path).await?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        for part in parts {
            let bytes = tokio::fs::read(self.path(part)).await?;
            hasher.update(&bytes);
            size += bytes.len() as u64;
            out.write_all(&bytes).await?;
        }
        out.sync_all().await?;
        Ok((size, hex::encode(hasher.finalize())))
    }

    async fn rename(&self, from: &str, to: &str) -> std::io::Result<()> {
        let target = self.parent_dirs(to).await?;
        tokio::fs::rename(self.path(from), target).await
    }

    async fn delete(&self, key: &str) -> std::io::Result<()> {
        match tokio::fs::remove_file(self.path(key)).await {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}
