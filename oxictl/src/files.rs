//! `oxictl send-file` and `oxictl download`: a file from disk to a user as a media message,
//! and a media message's file back to disk. Both stream: an upload reads one 512 KiB part at
//! a time and a download writes one 1 MiB window at a time, a few of them in flight, so a
//! file of any size costs a few MiB of memory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use oxigram_client::{Client, sent_update};
use oxigram_proto::{
    api::v1::{
        CompleteUploadRequest, GetMessageFileRequest, GetMessagesRequest, InputMedia,
        InputSingleMedia, SaveFilePartRequest, SendMediaRequest, UploadByHashRequest,
        media_client::MediaClient,
    },
    types::v1::{File, InputPeer, Message, message_media::Kind},
};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::device::DeviceClient;
use crate::progress::Progress;

/// The largest part `SaveFilePart` takes.
pub const PART: usize = 512 * 1024;
/// The most parts an upload may have (`CompleteUpload`'s `parts`).
const MAX_PARTS: u64 = 8000;
/// `GetMessageFile`'s largest window; windows at multiples of it meet every range rule.
const WINDOW: u64 = 1024 * 1024;
/// Parts or windows on the wire at once: enough to hide a round trip behind the others'
/// transfer, few enough that memory stays a few MiB.
const IN_FLIGHT: usize = 4;
/// How often a part or window is tried when the server says to come back (a flood wait, a
/// service unavailable): each try replaces the last, so a retry is harmless.
const ATTEMPTS: usize = 5;

/// What a file is sent as: the kinds SendMedia takes for a file from disk.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum SendAs {
    Photo,
    Document,
    Voice,
    Video,
    Audio,
}

impl SendAs {
    fn kind(self) -> Kind {
        match self {
            Self::Photo => Kind::Photo,
            Self::Document => Kind::Document,
            Self::Voice => Kind::Voice,
            Self::Video => Kind::Video,
            Self::Audio => Kind::Audio,
        }
    }
}

#[derive(clap::Args)]
pub struct SendFileArgs {
    /// Who gets it: +phone, @username, id, or `me` (Saved Messages).
    peer: String,
    /// The file to send.
    path: PathBuf,
    /// The message's text.
    #[arg(long, default_value = "")]
    caption: String,
    /// What the file is sent as.
    #[arg(long = "as", value_enum, default_value_t = SendAs::Document)]
    kind: SendAs,
    /// Its MIME type (default: from the file's extension, else application/octet-stream).
    #[arg(long)]
    mime: Option<String>,
    /// Reuse to resend the same message (idempotent).
    #[arg(long)]
    random_id: Option<i64>,
}

#[derive(clap::Args)]
pub struct DownloadArgs {
    /// The dialog the message is in: +phone, @username, id, or `me`.
    peer: String,
    /// The message's id in your box.
    msg_id: i64,
    /// Where to write the file (a folder: the file's own name in it). Default: its own name
    /// in the current folder.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
}

/// The MIME type of a file from its extension, for the common kinds; anything else is bytes.
pub fn guess_mime(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "html" | "htm" => "text/html",
        "csv" => "text/csv",
        "json" => "application/json",
        "xml" => "application/xml",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "mp3" => "audio/mpeg",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "wav" => "audio/wav",
        "flac" => "audio/flac",
        "m4a" => "audio/mp4",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "mov" => "video/quicktime",
        "mkv" => "video/x-matroska",
        _ => "application/octet-stream",
    }
}

/// A status of the gateway as oxictl prints every one: its stable code first.
fn api(status: tonic::Status) -> anyhow::Error {
    oxigram_client::Error::from(status).into()
}

/// How long to wait before trying a call again, when its refusal says to come back.
fn retry_after(status: &tonic::Status) -> Option<Duration> {
    let code = oxigram_client::Error::from(status.clone()).code();
    if let Some(secs) = code.strip_prefix("FLOOD_WAIT_") {
        return secs.parse().ok().map(Duration::from_secs);
    }
    (code == "SERVICE_UNAVAILABLE" || code == "CONNECTION_LOST").then_some(Duration::from_secs(1))
}

/// Reads until `buf` is full or the file ends; the count read.
async fn read_full(file: &mut tokio::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]).await? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// The file's SHA-256 (hex), read part by part.
async fn sha256_of(path: &Path) -> anyhow::Result<String> {
    let mut file = tokio::fs::File::open(path).await?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0; PART];
    loop {
        let n = read_full(&mut file, &mut buf).await?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// An upload as the server completed it, and whether its bytes had to travel.
pub struct Uploaded {
    pub file: File,
    /// The server held the content already (UploadByHash): no part was sent.
    pub instant: bool,
    pub parts: u64,
}

/// Makes `path` a file of the caller's: by its SHA-256 when the server holds content she may
/// see, else in parts of 512 KiB. The file is read twice in the second case (the hash must
/// be known before the instant upload is asked for), never held whole.
pub async fn upload(client: &Client, path: &Path, name: &str) -> anyhow::Result<Uploaded> {
    let size = tokio::fs::metadata(path)
        .await
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    ensure!(
        size > 0,
        "{} is empty: there is nothing to send",
        path.display()
    );
    let parts = size.div_ceil(PART as u64);
    ensure!(
        parts <= MAX_PARTS,
        "{} is {} MiB: a file may have at most {MAX_PARTS} parts of 512 KiB (4000 MiB)",
        path.display(),
        size / (1024 * 1024)
    );
    let sha256 = sha256_of(path)
        .await
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut media = MediaClient::new(client.channel());
    let by_hash = media
        .upload_by_hash(UploadByHashRequest {
            sha256: sha256.clone(),
            size: size as i64,
            name: name.to_owned(),
        })
        .await;
    match by_hash {
        Ok(file) => {
            return Ok(Uploaded {
                file: file.into_inner(),
                instant: true,
                parts: 0,
            });
        }
        // Content the server has not got, or not for her: the bytes must travel.
        Err(s) if oxigram_errors::code_of(&s).as_deref() == Some("FILE_HASH_UNKNOWN") => {}
        Err(s) => return Err(api(s)).context("instant upload"),
    }
    let file = upload_parts(client, path, size, name).await?;
    // The server hashed what it got: another hash than the one just read means the file
    // changed on disk while it was sent.
    ensure!(
        file.sha256 == sha256 && file.size == size as i64,
        "{} changed while it was sent: send it again",
        path.display()
    );
    Ok(Uploaded {
        file,
        instant: false,
        parts,
    })
}

/// Streams the file in parts of 512 KiB, a few in flight, and completes the upload.
async fn upload_parts(client: &Client, path: &Path, size: u64, name: &str) -> anyhow::Result<File> {
    // The client chooses the upload's id; a random one never meets another upload of hers.
    let upload_id = rand::random_range(1..i64::MAX);
    let file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("cannot read {}", path.display()))?;
    // Parts are read one after the other; only IN_FLIGHT of them are held at once, as
    // `buffer_unordered` asks the reader for the next part only when a slot is free.
    let reader = stream::try_unfold((file, 0i32), |(mut file, part)| async move {
        let mut buf = vec![0; PART];
        let n = read_full(&mut file, &mut buf).await?;
        if n == 0 {
            return Ok::<_, anyhow::Error>(None);
        }
        buf.truncate(n);
        Ok(Some(((part, buf), (file, part + 1))))
    });
    let mut progress = Progress::new("upload  ", size);
    let mut sent = std::pin::pin!(
        reader
            .map_ok(|(part, bytes)| save_part(client, upload_id, part, bytes))
            .try_buffer_unordered(IN_FLIGHT)
    );
    let mut parts = 0i32;
    while let Some(n) = sent.try_next().await? {
        parts += 1;
        progress.add(n as u64);
    }
    progress.finish();
    let completed = MediaClient::new(client.channel())
        .complete_upload(CompleteUploadRequest {
            file_id: upload_id,
            parts,
            name: name.to_owned(),
        })
        .await
        .map_err(api)
        .context("CompleteUpload")?;
    Ok(completed.into_inner())
}

/// Saves one part, trying again while the server says to come back; the part's length.
async fn save_part(
    client: &Client,
    upload_id: i64,
    part: i32,
    bytes: Vec<u8>,
) -> anyhow::Result<usize> {
    let len = bytes.len();
    // Shared by every attempt, never copied.
    let bytes = bytes::Bytes::from(bytes);
    let mut media = MediaClient::new(client.channel());
    let mut attempt = 0;
    loop {
        attempt += 1;
        let request = SaveFilePartRequest {
            file_id: upload_id,
            part,
            bytes: bytes.clone(),
        };
        match media.save_file_part(request).await {
            Ok(_) => return Ok(len),
            Err(s) => match retry_after(&s) {
                Some(wait) if attempt < ATTEMPTS => tokio::time::sleep(wait).await,
                _ => return Err(api(s)).with_context(|| format!("SaveFilePart {part}")),
            },
        }
    }
}

/// `oxictl send-file`: uploads the file (instantly when the server has it) and sends it as
/// one media message; prints how it went up and the message.
pub async fn send_file(path: &Path, args: SendFileArgs) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let peer = crate::input_peer(&c.client, &args.peer).await?;
    let name = args
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{} names no file", args.path.display()))?
        .to_owned();
    let mime = args
        .mime
        .clone()
        .unwrap_or_else(|| guess_mime(&args.path).to_owned());
    let up = upload(&c.client, &args.path, &name).await?;
    if up.instant {
        println!(
            "instant upload: the server holds this content already ({} bytes, sha256 {})",
            up.file.size, up.file.sha256
        );
    } else {
        println!(
            "uploaded {} bytes in {} part(s) (sha256 {})",
            up.file.size, up.parts, up.file.sha256
        );
    }
    let item = InputSingleMedia {
        media: Some(InputMedia {
            kind: args.kind.kind() as i32,
            file_id: up.file.id,
            mime_type: mime,
            file_name: name,
            ..InputMedia::default()
        }),
        random_id: args
            .random_id
            .unwrap_or_else(|| rand::random_range(1..i64::MAX)),
        caption: args.caption,
        entities: vec![],
    };
    let answer = c
        .client
        .messages()
        .send_media(SendMediaRequest {
            peer: Some(peer),
            multi_media: vec![item],
            ..SendMediaRequest::default()
        })
        .await
        .map_err(api)?
        .into_inner();
    let sent = answer
        .sent
        .into_iter()
        .next()
        .context("no message in the answer")?;
    let m = sent.message.as_ref().context("no message in the answer")?;
    println!(
        "sent {} (random_id {}, pts {})",
        crate::show(m),
        sent.random_id,
        sent.pts
    );
    c.apply_own(path, sent_update(sent))
}

/// Message `msg_id` of the caller's box, when it is in her dialog with `peer`.
async fn message_in(client: &Client, peer: i64, msg_id: i64) -> anyhow::Result<Message> {
    let found = client
        .messages()
        .get_messages(GetMessagesRequest { ids: vec![msg_id] })
        .await
        .map_err(api)?
        .into_inner();
    match found.messages.into_iter().find(|m| m.id == msg_id) {
        Some(m) if m.peer_user() == peer => Ok(m),
        // The gateway's own code for a message the caller's box does not hold.
        _ => bail!("MESSAGE_ID_INVALID: your dialog with {peer} holds no message #{msg_id}"),
    }
}

/// The name to save a message's file under: the sender's file name without any folder in
/// it (a name is the sender's text, never a path to write to), else one made of the id.
fn local_name(file_name: &str, msg_id: i64) -> String {
    match Path::new(file_name).file_name().and_then(|n| n.to_str()) {
        Some(name) if !name.is_empty() && name != "." && name != ".." => name.to_owned(),
        _ => format!("message-{msg_id}.bin"),
    }
}

/// `oxictl download`: the file of a media message, window by window, to a file; checks its
/// size and SHA-256 before it takes the file's name, and prints where it is.
pub async fn download(path: &Path, args: DownloadArgs) -> anyhow::Result<()> {
    let c = DeviceClient::open(path).await?;
    let peer = match args.peer.as_str() {
        // Her own Saved Messages: the dialog's peer is herself.
        "me" => c.client.get_me().await?.id,
        who => crate::resolve(&c.client, who).await?,
    };
    let m = message_in(&c.client, peer, args.msg_id).await?;
    let media = m
        .media
        .clone()
        .with_context(|| format!("message #{} carries no file", args.msg_id))?;
    let name = local_name(&media.file_name, args.msg_id);
    let out = match args.output {
        Some(o) if o.is_dir() => o.join(&name),
        Some(o) => o,
        None => PathBuf::from(&name),
    };
    // Written beside its final name and renamed once checked: a broken download never
    // passes for the file.
    let mut partial = out.clone().into_os_string();
    partial.push(".part");
    let partial = PathBuf::from(partial);
    let fetched = fetch(&c.client, peer, &m, &partial).await;
    let checked = fetched.and_then(|(size, sha256)| {
        ensure!(
            size == media.size as u64,
            "got {size} bytes, the message says {}",
            media.size
        );
        ensure!(
            media.sha256.is_empty() || sha256 == media.sha256,
            "the bytes' SHA-256 is {sha256}, the message says {}",
            media.sha256
        );
        Ok(())
    });
    if let Err(e) = checked {
        let _ = std::fs::remove_file(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, &out)
        .with_context(|| format!("cannot move the download to {}", out.display()))?;
    println!(
        "saved {} ({} bytes, sha256 {})",
        out.display(),
        media.size,
        if media.sha256.is_empty() {
            "not given"
        } else {
            "checked"
        }
    );
    Ok(())
}

/// Reads the message's file in 1 MiB windows, a few in flight, and writes them in order to
/// `to`; the count written and their SHA-256.
async fn fetch(
    client: &Client,
    peer: i64,
    m: &Message,
    to: &Path,
) -> anyhow::Result<(u64, String)> {
    let size = m.media.as_ref().map_or(0, |x| x.size) as u64;
    let reference = m
        .media
        .as_ref()
        .map(|x| x.file_reference.clone())
        .unwrap_or_default();
    let reference = tokio::sync::Mutex::new(reference);
    let mut file = tokio::fs::File::create(to)
        .await
        .with_context(|| format!("cannot write {}", to.display()))?;
    let mut hasher = Sha256::new();
    let mut progress = Progress::new("download", size);
    let windows = (0..size.div_ceil(WINDOW)).map(|i| i * WINDOW);
    let reference = &reference;
    let mut chunks = std::pin::pin!(
        stream::iter(windows)
            .map(|offset| window(client, peer, m.id, reference, offset, size))
            .buffered(IN_FLIGHT)
    );
    let mut written = 0u64;
    while let Some(bytes) = chunks.try_next().await? {
        file.write_all(&bytes)
            .await
            .with_context(|| format!("cannot write {}", to.display()))?;
        hasher.update(&bytes);
        written += bytes.len() as u64;
        progress.add(bytes.len() as u64);
    }
    progress.finish();
    file.flush().await?;
    Ok((written, hex::encode(hasher.finalize())))
}

/// One window of the file at `offset`; an expired file reference is renewed by reading the
/// message again, and a come-back-later answer is tried again.
async fn window(
    client: &Client,
    peer: i64,
    msg_id: i64,
    reference: &tokio::sync::Mutex<Vec<u8>>,
    offset: u64,
    size: u64,
) -> anyhow::Result<Vec<u8>> {
    let mut media = MediaClient::new(client.channel());
    let expected = WINDOW.min(size - offset) as usize;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let file_reference = reference.lock().await.clone();
        let request = GetMessageFileRequest {
            peer: Some(InputPeer::user(peer)),
            msg_id,
            file_reference,
            thumb_size: String::new(),
            offset: offset as i64,
            limit: WINDOW as i32,
        };
        let refused = match media.get_message_file(request).await {
            Ok(chunk) => {
                let bytes = chunk.into_inner().bytes;
                ensure!(
                    bytes.len() == expected,
                    "the server sent {} bytes at offset {offset}, expected {expected}",
                    bytes.len()
                );
                return Ok(bytes.into());
            }
            Err(s) => s,
        };
        let expired =
            oxigram_errors::code_of(&refused).as_deref() == Some("FILE_REFERENCE_EXPIRED");
        if attempt < ATTEMPTS && expired {
            let fresh = message_in(client, peer, msg_id).await?;
            *reference.lock().await = fresh.media.map(|x| x.file_reference).unwrap_or_default();
            continue;
        }
        match retry_after(&refused) {
            Some(wait) if attempt < ATTEMPTS => tokio::time::sleep(wait).await,
            _ => {
                return Err(api(refused)).with_context(|| format!("GetMessageFile at {offset}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_types_come_from_common_extensions() {
        for (name, mime) in [
            ("a.JPG", "image/jpeg"),
            ("b.png", "image/png"),
            ("notes.txt", "text/plain"),
            ("song.mp3", "audio/mpeg"),
            ("clip.mp4", "video/mp4"),
            ("archive.tar.gz", "application/gzip"),
            ("noext", "application/octet-stream"),
            ("weird.xyz", "application/octet-stream"),
        ] {
            assert_eq!(guess_mime(Path::new(name)), mime, "{name}");
        }
    }

    #[test]
    fn a_senders_file_name_never_leaves_the_folder() {
        for (sent, saved) in [
            ("report.pdf", "report.pdf"),
            ("../../etc/passwd", "passwd"),
            ("/abs/x.bin", "x.bin"),
            ("..", "message-7.bin"),
            ("", "message-7.bin"),
        ] {
            assert_eq!(local_name(sent, 7), saved, "{sent:?}");
        }
    }
}
