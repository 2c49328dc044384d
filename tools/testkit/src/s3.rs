//! A real S3-compatible server for the tests of the S3 blob path: moto's server mode
//! (`moto_server`, PyPI's `moto[server]`; `scripts/install-moto.sh` installs it), started per
//! test on a free port and stopped on drop. moto speaks S3's REST API over plain HTTP,
//! multipart uploads and ranged reads included, keeping objects in its own memory; it needs
//! no credentials of its own, and accepts any signature.

use std::{process::Stdio, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    process::{Child, Command},
};

use crate::{free_port, unique_name};

/// A running moto server with one bucket.
pub struct S3Server {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub bucket: String,
    child: Child,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The moto server binary: `OXIGRAM_MOTO_SERVER`, else `moto_server` on the PATH, else the
/// one `scripts/install-moto.sh` installs.
fn moto_binary() -> String {
    if let Ok(bin) = std::env::var("OXIGRAM_MOTO_SERVER") {
        return bin;
    }
    let installed = std::env::var("HOME")
        .map(|home| format!("{home}/.cache/oxigram/moto-venv/bin/moto_server"))
        .unwrap_or_default();
    match std::path::Path::new(&installed).exists() {
        true => installed,
        false => "moto_server".into(),
    }
}

impl S3Server {
    /// Starts moto on a free port and makes a fresh bucket in it.
    pub async fn start() -> anyhow::Result<Self> {
        let port = free_port()?;
        let child = Command::new(moto_binary())
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!("moto_server could not start ({e}): run scripts/install-moto.sh")
            })?;
        let bucket = unique_name("oxigram-media")
            .replace('_', "-")
            .to_lowercase();
        let server = Self {
            endpoint: format!("http://127.0.0.1:{port}"),
            bucket,
            child,
        };
        let started = std::time::Instant::now();
        loop {
            match server.create_bucket(port).await {
                Ok(()) => return Ok(server),
                Err(err) if started.elapsed() > Duration::from_secs(30) => {
                    return Err(err.context("moto_server did not answer within 30 s"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// `PUT /<bucket>`: moto takes an unsigned request.
    async fn create_bucket(&self, port: u16) -> anyhow::Result<()> {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        let request = format!(
            "PUT /{} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.bucket
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        let answer = String::from_utf8_lossy(&answer);
        anyhow::ensure!(
            answer.starts_with("HTTP/1.1 200"),
            "bucket creation answered {}",
            answer.lines().next().unwrap_or("nothing")
        );
        Ok(())
    }
}
