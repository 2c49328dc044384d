//! A TCP proxy a test puts between the services and a server (Redis) to make the server hang
//! as a stuck process or a black-holed network does: while paused, connections stay open and
//! new ones are accepted, but no byte goes either way; what was sent meanwhile is delivered
//! once the proxy resumes.

use std::net::SocketAddr;

use anyhow::Context;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream, tcp::OwnedReadHalf, tcp::OwnedWriteHalf},
    sync::watch,
    task::JoinHandle,
};

/// A running proxy; it stops when dropped.
pub struct HangingProxy {
    pub addr: SocketAddr,
    paused: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl HangingProxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (paused, _) = watch::channel(false);
        let accept = {
            let paused = paused.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(forward(client, upstream, paused.subscribe()));
                }
            })
        };
        Ok(Self {
            addr,
            paused,
            accept,
        })
    }

    /// Stops forwarding, on every connection, until [`HangingProxy::resume`].
    pub fn hang(&self) {
        self.paused.send_replace(true);
    }

    pub fn resume(&self) {
        self.paused.send_replace(false);
    }
}

impl Drop for HangingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn forward(client: TcpStream, upstream: SocketAddr, mut paused: watch::Receiver<bool>) {
    if paused.wait_for(|p| !*p).await.is_err() {
        return;
    }
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        copy(client_read, server_write, paused.clone()),
        copy(server_read, client_write, paused),
    );
}

/// Copies `from` to `to`, holding what it read while paused until resumed; ends at either
/// side's end or error, or when the proxy is gone.
async fn copy(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut paused: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if paused.wait_for(|p| !*p).await.is_err() {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            // Paused while waiting for bytes: wait to be resumed before reading on.
            _ = paused.wait_for(|p| *p) => continue,
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if paused.wait_for(|p| !*p).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Redis' address and the URL's path (database), from `redis://host:port[/db]`: what a proxy
/// in front of it forwards to, and what the services' URL through the proxy keeps.
pub async fn split_redis_url(url: &str) -> anyhow::Result<(SocketAddr, String)> {
    let rest = url.strip_prefix("redis://").context("not a redis:// URL")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let addr = tokio::net::lookup_host(authority)
        .await?
        .next()
        .context("Redis host not found")?;
    Ok((addr, path.to_owned()))
}
