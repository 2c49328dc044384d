//! Files on the MTProto door: uploads (`upload.saveFilePart`, `upload.saveBigFilePart`), media
//! messages (`messages.sendMedia`, albums by `messages.sendMultiMedia`), an upload made media
//! without a message (`messages.uploadMedia`), files sent again by id (`inputMediaPhoto`,
//! `inputMediaDocument`), downloads (`upload.getFile`), and a message's file as Telegram's
//! photo or document. Each call is answered by the gRPC door's own handlers (`MediaApi`,
//! `MessagesApi`).
//!
//! Telegram's file locations name a file by `id`, `access_hash` and `file_reference` only,
//! while oxigram grants a download through the message the reader holds (`GetMessageFile`:
//! peer, box id, the reader's file reference). The door's `file_reference` therefore carries
//! the peer and the box id ahead of oxigram's reference (see [`Location`]); svc-messages still
//! decides: oxigram's reference is a MAC over the reader, the box id and the content, and the
//! box must hold the message in that dialog, so a reference changed or presented by anyone else
//! opens nothing. Sent again by id, such a file becomes the sender's own by instant upload
//! (`Media.UploadByHash`, granted only for content she may see). The media `uploadMedia` answers
//! has no message yet: its reference carries the `InputMedia` the upload became (see
//! [`Reference`]), which svc-media resolves like any other when it is sent (the file must be
//! the sender's own upload); it can be sent, not downloaded.

use prost::Message as _;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use oxigram_mtproto::session::RpcError;
use oxigram_proto::api::v1::{media_server::Media, messages_server::Messages};
use oxigram_proto::types::v1::{self as ox, message_media::Kind};
use oxigram_tl::{Identifiable, Serializable, enums, functions, types};

use super::api::{read, request, signed_in};
use super::convert::{self, int};
use super::messages::{formatting, reply_to_msg_id, sent_updates};
use crate::{
    Gateway,
    media_api::MediaApi,
    messages_api::{MessagesApi, album_size},
};

/// Telegram's data centre number of this door (the only one).
const DC_ID: i32 = 1;
/// Parts of one upload, as svc-media takes them.
const MAX_PARTS: i32 = 8000;
/// Telegram's download window: offsets and limits in 4 KiB steps, a limit dividing 1 MiB, no
/// range across a 1 MiB boundary.
const ALIGN: i64 = 4096;
const WINDOW: i64 = 1 << 20;
/// Completed uploads this process remembers before it forgets them all.
const MAX_REMEMBERED_UPLOADS: usize = 4096;

fn status(status: tonic::Status) -> RpcError {
    convert::rpc_error(&status)
}

/// A file named by id that names nothing the caller may send.
fn media_invalid() -> RpcError {
    RpcError::new(400, "MEDIA_INVALID")
}

/// The uploads this process completed, by (user, the client's file id, parts): Telegram lets a
/// client send an uploaded file again (a retried `messages.sendMedia`, which must find its
/// first answer by random_id), while svc-media uses the parts up on completion. A file
/// completed on another instance is not here; the client then uploads it again.
#[derive(Default)]
pub struct Uploads(Mutex<HashMap<(i64, i64, i32), ox::File>>);

impl Uploads {
    fn get(&self, key: (i64, i64, i32)) -> Option<ox::File> {
        self.0.lock().ok()?.get(&key).cloned()
    }

    fn put(&self, key: (i64, i64, i32), file: ox::File) {
        if let Ok(mut uploads) = self.0.lock() {
            if uploads.len() >= MAX_REMEMBERED_UPLOADS {
                uploads.clear();
            }
            uploads.insert(key, file);
        }
    }
}

/// Answers a file call, or `None` for a method this file does not map.
pub async fn answer(
    gateway: &Arc<Gateway>,
    uploads: &Uploads,
    header: &str,
    id: u32,
    query: &[u8],
) -> Option<Result<Vec<u8>, RpcError>> {
    Some(match id {
        functions::upload::SaveFilePart::CONSTRUCTOR_ID => {
            save_file_part(gateway, header, query).await
        }
        functions::upload::SaveBigFilePart::CONSTRUCTOR_ID => {
            save_big_file_part(gateway, header, query).await
        }
        functions::messages::SendMedia::CONSTRUCTOR_ID => {
            send_media(gateway, uploads, header, query).await
        }
        functions::messages::SendMultiMedia::CONSTRUCTOR_ID => {
            send_multi_media(gateway, uploads, header, query).await
        }
        functions::messages::UploadMedia::CONSTRUCTOR_ID => {
            upload_media(gateway, uploads, header, query).await
        }
        functions::upload::GetFile::CONSTRUCTOR_ID => get_file(gateway, header, query).await,
        _ => return None,
    })
}

/// One part through `Media.SaveFilePart` (whose rules and codes hold: FILE_PART_INVALID,
/// FILE_PART_TOO_BIG, …); an empty part is Telegram's FILE_PART_EMPTY.
async fn save_part(
    gateway: &Arc<Gateway>,
    header: &str,
    file_id: i64,
    part: i32,
    bytes: Vec<u8>,
) -> Result<Vec<u8>, RpcError> {
    if bytes.is_empty() {
        return Err(RpcError::new(400, "FILE_PART_EMPTY"));
    }
    MediaApi(gateway.clone())
        .save_file_part(request(
            header,
            ox::SaveFilePartRequest {
                file_id,
                part,
                bytes: bytes.into(),
            },
        )?)
        .await
        .map_err(status)?;
    Ok(true.to_bytes())
}

async fn save_file_part(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let part: functions::upload::SaveFilePart = read(query)?;
    save_part(gateway, header, part.file_id, part.file_part, part.bytes).await
}

async fn save_big_file_part(
    gateway: &Arc<Gateway>,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let part: functions::upload::SaveBigFilePart = read(query)?;
    // The total is Telegram's own field: svc-media counts parts when the upload completes.
    if !(1..=MAX_PARTS).contains(&part.file_total_parts) {
        return Err(RpcError::new(400, "FILE_PARTS_INVALID"));
    }
    if !(0..part.file_total_parts).contains(&part.file_part) {
        return Err(RpcError::new(400, "FILE_PART_INVALID"));
    }
    save_part(gateway, header, part.file_id, part.file_part, part.bytes).await
}

/// An uploaded `InputFile` as the caller's oxigram file (`Media.CompleteUpload`, or the file a
/// former completion of the same upload gave).
async fn complete(
    gateway: &Arc<Gateway>,
    uploads: &Uploads,
    header: &str,
    me: i64,
    file: &enums::InputFile,
) -> Result<ox::File, RpcError> {
    let (id, parts, name) = match file {
        enums::InputFile::File(f) => (f.id, f.parts, f.name.clone()),
        enums::InputFile::Big(f) => (f.id, f.parts, f.name.clone()),
        _ => return Err(RpcError::new(400, "MEDIA_INVALID")),
    };
    let key = (me, id, parts);
    if let Some(file) = uploads.get(key) {
        return Ok(file);
    }
    let done = MediaApi(gateway.clone())
        .complete_upload(request(
            header,
            ox::CompleteUploadRequest {
                file_id: id,
                parts,
                name,
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    uploads.put(key, done.clone());
    Ok(done)
}

/// A document's attributes as oxigram's media fields (the kind and file already set).
fn document_attributes(media: &mut ox::InputMedia, attributes: &[enums::DocumentAttribute]) {
    for attribute in attributes {
        match attribute {
            enums::DocumentAttribute::Filename(a) => media.file_name = a.file_name.clone(),
            enums::DocumentAttribute::ImageSize(a) => (media.w, media.h) = (a.w, a.h),
            enums::DocumentAttribute::Audio(a) => {
                media.kind = (if a.voice { Kind::Voice } else { Kind::Audio }) as i32;
                media.duration = a.duration;
                media.title = a.title.clone().unwrap_or_default();
                media.performer = a.performer.clone().unwrap_or_default();
                // Only a voice note has a waveform in oxigram.
                if a.voice {
                    media.waveform = a.waveform.clone().unwrap_or_default();
                }
            }
            enums::DocumentAttribute::Video(a) => {
                media.kind = (if a.round_message {
                    Kind::VideoNote
                } else {
                    Kind::Video
                }) as i32;
                media.duration = a.duration.round() as i32;
                (media.w, media.h) = (a.w, a.h);
            }
            // Stickers, animations, custom emoji: the file stays a plain document.
            _ => {}
        }
    }
}

/// The request's medium as oxigram's `InputMedia`, its files completed.
pub(super) async fn input_media(
    gateway: &Arc<Gateway>,
    uploads: &Uploads,
    header: &str,
    me: i64,
    media: &enums::InputMedia,
) -> Result<ox::InputMedia, RpcError> {
    Ok(resolve_input(gateway, uploads, header, me, media).await?.0)
}

/// [`input_media`], with the file an upload completed into (none for a file by id).
async fn resolve_input(
    gateway: &Arc<Gateway>,
    uploads: &Uploads,
    header: &str,
    me: i64,
    media: &enums::InputMedia,
) -> Result<(ox::InputMedia, Option<ox::File>), RpcError> {
    match media {
        enums::InputMedia::UploadedPhoto(photo) => {
            // A self-destructing photo would outlive its timer here: refused, not ignored.
            if photo.ttl_seconds.is_some() {
                return Err(RpcError::new(400, "TTL_MEDIA_INVALID"));
            }
            if photo.live_photo || photo.video.is_some() {
                return Err(RpcError::new(400, "MEDIA_INVALID"));
            }
            let file = complete(gateway, uploads, header, me, &photo.file).await?;
            let media = ox::InputMedia {
                kind: Kind::Photo as i32,
                file_id: file.id,
                ..Default::default()
            };
            Ok((media, Some(file)))
        }
        enums::InputMedia::UploadedDocument(document) => {
            if document.ttl_seconds.is_some() {
                return Err(RpcError::new(400, "TTL_MEDIA_INVALID"));
            }
            let mut media = ox::InputMedia {
                kind: Kind::Document as i32,
                mime_type: document.mime_type.clone(),
                ..Default::default()
            };
            document_attributes(&mut media, &document.attributes);
            // A file sent "as a file" keeps its name and size but not its player.
            if document.force_file {
                media.kind = Kind::Document as i32;
                media.waveform.clear();
            }
            let file = complete(gateway, uploads, header, me, &document.file).await?;
            media.file_id = file.id;
            if let Some(thumb) = &document.thumb {
                media.thumb_file_id = complete(gateway, uploads, header, me, thumb).await?.id;
            }
            Ok((media, Some(file)))
        }
        enums::InputMedia::Photo(photo) => {
            if photo.ttl_seconds.is_some() {
                return Err(RpcError::new(400, "TTL_MEDIA_INVALID"));
            }
            if photo.live_photo || photo.video.is_some() {
                return Err(media_invalid());
            }
            let enums::InputPhoto::Photo(id) = &photo.id else {
                return Err(RpcError::new(400, "MEDIA_EMPTY"));
            };
            let media = by_id(gateway, header, id.id, &id.file_reference, true).await?;
            Ok((media, None))
        }
        enums::InputMedia::Document(document) => {
            if document.ttl_seconds.is_some() {
                return Err(RpcError::new(400, "TTL_MEDIA_INVALID"));
            }
            // A video's cover is a photo of its own, which oxigram's media do not carry.
            if document.video_cover.is_some() {
                return Err(media_invalid());
            }
            let enums::InputDocument::Document(id) = &document.id else {
                return Err(RpcError::new(400, "MEDIA_EMPTY"));
            };
            let media = by_id(gateway, header, id.id, &id.file_reference, false).await?;
            Ok((media, None))
        }
        enums::InputMedia::Empty => Err(RpcError::new(400, "MEDIA_EMPTY")),
        // Geo points, contacts, polls, files by URL, …: oxigram has no such media.
        _ => Err(media_invalid()),
    }
}

/// A photo (`photo`) or document the caller names by the id and reference the door gave her, as
/// a file of hers to send: the media an upload became (`messages.uploadMedia`), or the file of
/// a message in her box, made her own by instant upload (svc-media grants it only for content
/// she may see). A reference or id that names neither is `MEDIA_INVALID`.
async fn by_id(
    gateway: &Arc<Gateway>,
    header: &str,
    id: i64,
    reference: &[u8],
    photo: bool,
) -> Result<ox::InputMedia, RpcError> {
    let is_photo = |kind: i32| kind == Kind::Photo as i32;
    let location = match Reference::decode(reference).ok_or_else(media_invalid)? {
        Reference::Upload(media) if media.file_id == id && is_photo(media.kind) == photo => {
            return Ok(media);
        }
        Reference::Upload(_) => return Err(media_invalid()),
        Reference::Message(location) => location,
    };
    let found = MessagesApi(gateway.clone())
        .get_messages(request(
            header,
            ox::GetMessagesRequest {
                ids: vec![location.msg_id],
            },
        )?)
        .await
        .map_err(status)?
        .into_inner();
    let media = found
        .messages
        .into_iter()
        .find(|m| m.id == location.msg_id && dialog_peer(m) == location.peer)
        .and_then(|m| m.media)
        .map(|m| *m)
        .filter(|m| m.file_id == id && is_photo(m.kind) == photo)
        .ok_or_else(media_invalid)?;
    let file = MediaApi(gateway.clone())
        .upload_by_hash(request(
            header,
            ox::UploadByHashRequest {
                sha256: media.sha256.clone(),
                size: media.size,
                name: media.file_name.clone(),
            },
        )?)
        .await
        .map_err(
            |refused| match oxigram_errors::code_of(&refused).as_deref() {
                Some("FILE_HASH_UNKNOWN") => media_invalid(),
                _ => status(refused),
            },
        )?
        .into_inner();
    if photo {
        // A photo's sizes are made again from the file.
        return Ok(ox::InputMedia {
            kind: media.kind,
            file_id: file.id,
            ..Default::default()
        });
    }
    // The same document: its type and attributes as the message carried them (a client
    // thumbnail is not carried over: it was a file of the first sender's).
    Ok(ox::InputMedia {
        kind: media.kind,
        file_id: file.id,
        mime_type: media.mime_type,
        file_name: media.file_name,
        duration: media.duration,
        w: media.w,
        h: media.h,
        waveform: media.waveform,
        thumb_file_id: 0,
        title: media.title,
        performer: media.performer,
    })
}

async fn send_media(
    gateway: &Arc<Gateway>,
    uploads: &Uploads,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let send: functions::messages::SendMedia = read(query)?;
    let me = signed_in(gateway, header).await?;
    let peer = convert::input_peer(&send.peer)?;
    let entities = formatting(gateway, header, send.entities.as_deref()).await?;
    let media = input_media(gateway, uploads, header, me, &send.media).await?;
    let item = ox::InputSingleMedia {
        media: Some(media),
        random_id: send.random_id,
        caption: send.message,
        entities,
    };
    let request = ox::SendMediaRequest {
        peer: Some(peer),
        multi_media: vec![item],
        reply_to_msg_id: reply_to_msg_id(send.reply_to.as_ref()),
        silent: send.silent,
        noforwards: send.noforwards,
    };
    send_items(gateway, header, me, request).await
}

/// An album: every item with its own file, random_id and caption, sent in one call (one
/// `grouped_id`, all or nothing) by `Messages.SendMedia`.
async fn send_multi_media(
    gateway: &Arc<Gateway>,
    uploads: &Uploads,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let send: functions::messages::SendMultiMedia = read(query)?;
    let me = signed_in(gateway, header).await?;
    let peer = convert::input_peer(&send.peer)?;
    // The count first: no upload is completed for an album refused anyway.
    album_size(send.multi_media.len()).map_err(status)?;
    let mut items = Vec::with_capacity(send.multi_media.len());
    for enums::InputSingleMedia::Media(item) in &send.multi_media {
        let entities = formatting(gateway, header, item.entities.as_deref()).await?;
        items.push(ox::InputSingleMedia {
            media: Some(input_media(gateway, uploads, header, me, &item.media).await?),
            random_id: item.random_id,
            caption: item.message.clone(),
            entities,
        });
    }
    let request = ox::SendMediaRequest {
        peer: Some(peer),
        multi_media: items,
        reply_to_msg_id: reply_to_msg_id(send.reply_to.as_ref()),
        silent: send.silent,
        noforwards: send.noforwards,
    };
    send_items(gateway, header, me, request).await
}

/// Sends media messages through `Messages.SendMedia` and answers as Telegram answers a media
/// send: per item, in order, the id for its random_id, then the new message.
async fn send_items(
    gateway: &Arc<Gateway>,
    header: &str,
    me: i64,
    send: ox::SendMediaRequest,
) -> Result<Vec<u8>, RpcError> {
    let sent = MessagesApi(gateway.clone())
        .send_media(request(header, send)?)
        .await
        .map_err(status)?
        .into_inner();
    sent_updates(gateway, me, sent.sent).await
}

/// An uploaded photo or document as media to send later by id (clients upload an album's
/// items this way first). Nothing is sent and no message holds it yet, so it has no sizes
/// and no download: its reference carries the `InputMedia` it became, and svc-media checks
/// the file is the sender's own when it is sent. A file by id is media already: refused.
async fn upload_media(
    gateway: &Arc<Gateway>,
    uploads: &Uploads,
    header: &str,
    query: &[u8],
) -> Result<Vec<u8>, RpcError> {
    let upload: functions::messages::UploadMedia = read(query)?;
    let me = signed_in(gateway, header).await?;
    // The file is the uploader's whoever it goes to; the peer is checked when it is sent.
    convert::input_peer(&upload.peer)?;
    let (media, file) = resolve_input(gateway, uploads, header, me, &upload.media).await?;
    let file = file.ok_or_else(media_invalid)?;
    let snapshot = ox::MessageMedia {
        kind: media.kind,
        file_id: file.id,
        size: file.size,
        sha256: file.sha256.clone(),
        mime_type: media.mime_type.clone(),
        file_name: match media.file_name.is_empty() {
            true => file.name.clone(),
            false => media.file_name.clone(),
        },
        duration: media.duration,
        w: media.w,
        h: media.h,
        waveform: media.waveform.clone(),
        title: media.title.clone(),
        performer: media.performer.clone(),
        ..Default::default()
    };
    let reference = Reference::Upload(media).encode();
    let now = int(crate::transient::now_ms() / 1000);
    let answer = media_to_tl(&snapshot, now, &|_| reference.clone()).ok_or_else(media_invalid)?;
    Ok(answer.to_bytes())
}

/// Telegram's download rules (stricter than oxigram's: the limit must also divide 1 MiB).
fn check_window(offset: i64, limit: i32) -> Result<(), RpcError> {
    if offset < 0 || offset % ALIGN != 0 {
        return Err(RpcError::new(400, "OFFSET_INVALID"));
    }
    let limit = i64::from(limit);
    if limit <= 0 || limit % ALIGN != 0 || WINDOW % limit != 0 {
        return Err(RpcError::new(400, "LIMIT_INVALID"));
    }
    if offset / WINDOW != (offset + limit - 1) / WINDOW {
        return Err(RpcError::new(400, "LIMIT_INVALID"));
    }
    Ok(())
}

async fn get_file(gateway: &Arc<Gateway>, header: &str, query: &[u8]) -> Result<Vec<u8>, RpcError> {
    let get: functions::upload::GetFile = read(query)?;
    check_window(get.offset, get.limit)?;
    let (reference, thumb_size) = match get.location {
        enums::InputFileLocation::InputDocumentFileLocation(l) => (l.file_reference, l.thumb_size),
        enums::InputFileLocation::InputPhotoFileLocation(l) => (l.file_reference, l.thumb_size),
        _ => return Err(RpcError::new(400, "LOCATION_INVALID")),
    };
    let location =
        Location::decode(&reference).ok_or_else(|| RpcError::new(400, "LOCATION_INVALID"))?;
    // A photo's sizes (and a document's thumbnail) are JPEGs the server made.
    let storage = match thumb_size.is_empty() {
        true => location.storage,
        false => Storage::Jpeg,
    };
    let chunk = MediaApi(gateway.clone())
        .get_message_file(request(
            header,
            ox::GetMessageFileRequest {
                peer: Some(ox::InputPeer::user(location.peer)),
                msg_id: location.msg_id,
                file_reference: location.reference,
                thumb_size,
                offset: get.offset,
                limit: get.limit,
            },
        )?)
        .await
        .map_err(
            |refused| match oxigram_errors::code_of(&refused).as_deref() {
                // No such message in the caller's box: the location names nothing of hers.
                Some("MESSAGE_ID_INVALID" | "PEER_ID_INVALID") => {
                    RpcError::new(400, "LOCATION_INVALID")
                }
                _ => status(refused),
            },
        )?
        .into_inner();
    Ok(enums::upload::File::File(types::upload::File {
        r#type: storage.tl(),
        mtime: 0,
        bytes: chunk.bytes.to_vec(),
    })
    .to_bytes())
}

/// The file type `upload.file` names, from the document's MIME type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Storage {
    Partial = 0,
    Jpeg = 1,
    Png = 2,
    Gif = 3,
    Pdf = 4,
    Mp3 = 5,
    Mov = 6,
    Mp4 = 7,
    Webp = 8,
}

impl Storage {
    const ALL: [Storage; 9] = [
        Storage::Partial,
        Storage::Jpeg,
        Storage::Png,
        Storage::Gif,
        Storage::Pdf,
        Storage::Mp3,
        Storage::Mov,
        Storage::Mp4,
        Storage::Webp,
    ];

    fn of_mime(mime: &str) -> Storage {
        match mime {
            "image/jpeg" => Storage::Jpeg,
            "image/png" => Storage::Png,
            "image/gif" => Storage::Gif,
            "application/pdf" => Storage::Pdf,
            "audio/mpeg" | "audio/mp3" => Storage::Mp3,
            "video/quicktime" => Storage::Mov,
            "video/mp4" => Storage::Mp4,
            "image/webp" => Storage::Webp,
            // Telegram's answer for a file whose type it does not name.
            _ => Storage::Partial,
        }
    }

    fn tl(self) -> enums::storage::FileType {
        use enums::storage::FileType as T;
        match self {
            Storage::Partial => T::FilePartial,
            Storage::Jpeg => T::FileJpeg,
            Storage::Png => T::FilePng,
            Storage::Gif => T::FileGif,
            Storage::Pdf => T::FilePdf,
            Storage::Mp3 => T::FileMp3,
            Storage::Mov => T::FileMov,
            Storage::Mp4 => T::FileMp4,
            Storage::Webp => T::FileWebp,
        }
    }
}

/// What the door's `file_reference` carries: the file type, the dialog's peer and the viewer's
/// box id of the message, then oxigram's reference as svc-messages gave it.
#[derive(Debug, PartialEq, Eq)]
struct Location {
    storage: Storage,
    peer: i64,
    msg_id: i64,
    reference: Vec<u8>,
}

/// The first byte of a door reference: its layout, so a later one can be told apart.
const LOCATION_LAYOUT: u8 = 1;

impl Location {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(18 + self.reference.len());
        out.push(LOCATION_LAYOUT);
        out.push(self.storage as u8);
        out.extend_from_slice(&self.peer.to_be_bytes());
        out.extend_from_slice(&self.msg_id.to_be_bytes());
        out.extend_from_slice(&self.reference);
        out
    }

    fn decode(bytes: &[u8]) -> Option<Location> {
        let (&layout, rest) = bytes.split_first()?;
        if layout != LOCATION_LAYOUT {
            return None;
        }
        let (&storage, rest) = rest.split_first()?;
        let storage = *Storage::ALL.get(usize::from(storage))?;
        let peer = i64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
        let msg_id = i64::from_be_bytes(rest.get(8..16)?.try_into().ok()?);
        let reference = rest.get(16..)?.to_vec();
        (peer > 0 && msg_id > 0 && !reference.is_empty()).then_some(Location {
            storage,
            peer,
            msg_id,
            reference,
        })
    }
}

/// The first byte of a door reference to media `messages.uploadMedia` made.
const UPLOAD_LAYOUT: u8 = 2;

/// What a door `file_reference` names: a message's file (a [`Location`]), or an upload made
/// media and not sent yet (the `InputMedia` it became, as protobuf). Neither grants anything by
/// itself: svc-messages checks the first, svc-media the file of the second.
#[derive(Debug, PartialEq)]
enum Reference {
    Message(Location),
    Upload(ox::InputMedia),
}

impl Reference {
    fn encode(&self) -> Vec<u8> {
        match self {
            Reference::Message(location) => location.encode(),
            Reference::Upload(media) => {
                let mut out = vec![UPLOAD_LAYOUT];
                out.extend_from_slice(&media.encode_to_vec());
                out
            }
        }
    }

    fn decode(bytes: &[u8]) -> Option<Reference> {
        match bytes.split_first()? {
            (&LOCATION_LAYOUT, _) => Location::decode(bytes).map(Reference::Message),
            (&UPLOAD_LAYOUT, media) => {
                let media = ox::InputMedia::decode(media).ok()?;
                (media.file_id > 0).then_some(Reference::Upload(media))
            }
            _ => None,
        }
    }
}

/// The other party of a message's private chat (the owner herself for Saved Messages).
fn dialog_peer(message: &ox::Message) -> i64 {
    match message.peer_id.as_ref().and_then(|p| p.kind.as_ref()) {
        Some(ox::peer::Kind::UserId(id)) => *id,
        None => message.from_user_id,
    }
}

/// A stable `access_hash` for a content: clients only hand it back; the reference decides.
fn access_hash(media: &ox::MessageMedia) -> i64 {
    let digits = media.sha256.get(..16).unwrap_or_default();
    u64::from_str_radix(digits, 16).map_or(0, |h| h as i64)
}

fn photo_size(size: &ox::PhotoSize) -> enums::PhotoSize {
    enums::PhotoSize::Size(types::PhotoSize {
        r#type: size.r#type.clone(),
        w: size.w,
        h: size.h,
        size: size.size,
    })
}

/// A message's file as Telegram's media, `None` for a message without one.
pub fn to_tl(message: &ox::Message) -> Option<enums::MessageMedia> {
    let media = message.media.as_deref()?;
    let file_reference = |storage: Storage| {
        Location {
            storage,
            peer: dialog_peer(message),
            msg_id: message.id,
            reference: media.file_reference.clone(),
        }
        .encode()
    };
    media_to_tl(media, int(message.date), &file_reference)
}

/// A file as Telegram's photo or document dated `date`, each location's reference made by
/// `file_reference` from the file type it downloads as.
fn media_to_tl(
    media: &ox::MessageMedia,
    date: i32,
    file_reference: &dyn Fn(Storage) -> Vec<u8>,
) -> Option<enums::MessageMedia> {
    let kind = Kind::try_from(media.kind).ok()?;
    if kind == Kind::Photo {
        let mut sizes = Vec::with_capacity(media.sizes.len() + 1);
        if !media.stripped_thumb.is_empty() {
            sizes.push(enums::PhotoSize::PhotoStrippedSize(
                types::PhotoStrippedSize {
                    r#type: "i".into(),
                    bytes: media.stripped_thumb.clone(),
                },
            ));
        }
        sizes.extend(media.sizes.iter().map(photo_size));
        return Some(enums::MessageMedia::Photo(types::MessageMediaPhoto {
            spoiler: false,
            live_photo: false,
            photo: Some(enums::Photo::Photo(types::Photo {
                has_stickers: false,
                id: media.file_id,
                access_hash: access_hash(media),
                file_reference: file_reference(Storage::Jpeg),
                date,
                sizes,
                video_sizes: None,
                dc_id: DC_ID,
            })),
            ttl_seconds: None,
            video: None,
        }));
    }
    let mut attributes = Vec::new();
    match kind {
        Kind::Voice | Kind::Audio => {
            let voice = kind == Kind::Voice;
            attributes.push(enums::DocumentAttribute::Audio(
                types::DocumentAttributeAudio {
                    voice,
                    duration: media.duration,
                    title: (!media.title.is_empty()).then(|| media.title.clone()),
                    performer: (!media.performer.is_empty()).then(|| media.performer.clone()),
                    waveform: (voice && !media.waveform.is_empty()).then(|| media.waveform.clone()),
                },
            ));
        }
        Kind::Video | Kind::VideoNote => {
            attributes.push(enums::DocumentAttribute::Video(
                types::DocumentAttributeVideo {
                    round_message: kind == Kind::VideoNote,
                    supports_streaming: false,
                    nosound: false,
                    duration: f64::from(media.duration),
                    w: media.w,
                    h: media.h,
                    preload_prefix_size: None,
                    video_start_ts: None,
                    video_codec: None,
                },
            ));
        }
        _ if media.w > 0 && media.h > 0 => {
            attributes.push(enums::DocumentAttribute::ImageSize(
                types::DocumentAttributeImageSize {
                    w: media.w,
                    h: media.h,
                },
            ));
        }
        _ => {}
    }
    if !media.file_name.is_empty() {
        attributes.push(enums::DocumentAttribute::Filename(
            types::DocumentAttributeFilename {
                file_name: media.file_name.clone(),
            },
        ));
    }
    let thumbs: Vec<enums::PhotoSize> = media.sizes.iter().map(photo_size).collect();
    Some(enums::MessageMedia::Document(types::MessageMediaDocument {
        nopremium: false,
        spoiler: false,
        video: kind == Kind::Video,
        round: kind == Kind::VideoNote,
        voice: kind == Kind::Voice,
        document: Some(enums::Document::Document(types::Document {
            id: media.file_id,
            access_hash: access_hash(media),
            file_reference: file_reference(Storage::of_mime(&media.mime_type)),
            date,
            mime_type: media.mime_type.clone(),
            size: media.size,
            thumbs: (!thumbs.is_empty()).then_some(thumbs),
            video_thumbs: None,
            dc_id: DC_ID,
            attributes,
        })),
        alt_documents: None,
        video_cover: None,
        video_timestamp: None,
        ttl_seconds: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_survives_its_reference_and_nothing_else_reads_as_one() {
        let location = Location {
            storage: Storage::Mp4,
            peer: 42,
            msg_id: 7,
            reference: vec![9; 24],
        };
        assert_eq!(Location::decode(&location.encode()), Some(location));
        let good = Location {
            storage: Storage::Partial,
            peer: 1,
            msg_id: 1,
            reference: vec![1],
        }
        .encode();
        let mut other_layout = good.clone();
        other_layout[0] = 2;
        let mut unknown_storage = good.clone();
        unknown_storage[1] = 99;
        let cases: [&[u8]; 5] = [
            &[],
            &other_layout,
            &unknown_storage,
            &good[..17],
            // The layout with no oxigram reference after it.
            &good[..18],
        ];
        for bytes in cases {
            assert_eq!(Location::decode(bytes), None, "{bytes:?}");
        }
    }

    #[test]
    fn an_upload_reference_carries_its_media_and_no_location_reads_as_one() {
        let media = ox::InputMedia {
            kind: Kind::Document as i32,
            file_id: 31,
            mime_type: "text/plain".into(),
            file_name: "a.txt".into(),
            ..Default::default()
        };
        let upload = Reference::Upload(media).encode();
        assert_eq!(
            Reference::decode(&upload),
            Some(Reference::Upload(ox::InputMedia {
                kind: Kind::Document as i32,
                file_id: 31,
                mime_type: "text/plain".into(),
                file_name: "a.txt".into(),
                ..Default::default()
            }))
        );
        // A download takes message locations only.
        assert_eq!(Location::decode(&upload), None);
        let location = Location {
            storage: Storage::Jpeg,
            peer: 4,
            msg_id: 9,
            reference: vec![3; 24],
        };
        let message = location.encode();
        assert_eq!(
            Reference::decode(&message),
            Some(Reference::Message(location))
        );
        let cases: [&[u8]; 4] = [
            &[],
            &[UPLOAD_LAYOUT],
            // Not protobuf.
            &[UPLOAD_LAYOUT, 0xff, 0xff],
            &[3, 1, 2],
        ];
        for bytes in cases {
            assert_eq!(Reference::decode(bytes), None, "{bytes:?}");
        }
    }

    #[test]
    fn telegram_windows_are_enforced() {
        // (offset, limit) -> the refusal, if any
        let cases: [((i64, i32), Option<&str>); 8] = [
            ((0, 131_072), None),
            ((1 << 20, 1 << 20), None),
            ((4096, 4096), None),
            ((1000, 4096), Some("OFFSET_INVALID")),
            ((-4096, 4096), Some("OFFSET_INVALID")),
            ((0, 12_288), Some("LIMIT_INVALID")),
            ((0, 0), Some("LIMIT_INVALID")),
            (((1 << 20) - 4096, 8192), Some("LIMIT_INVALID")),
        ];
        for ((offset, limit), refused) in cases {
            let got = check_window(offset, limit).err().map(|e| e.message);
            assert_eq!(got.as_deref(), refused, "offset {offset}, limit {limit}");
        }
    }

    #[test]
    fn documents_carry_their_attributes_and_photos_their_sizes() {
        let document = ox::Message {
            id: 5,
            peer_id: Some(ox::Peer::user(3)),
            media: Some(Box::new(ox::MessageMedia {
                kind: Kind::Voice as i32,
                file_id: 11,
                size: 900,
                sha256: "00000000000000ff".repeat(4),
                mime_type: "audio/ogg".into(),
                file_name: "v.ogg".into(),
                duration: 3,
                waveform: vec![1, 2],
                file_reference: vec![7; 24],
                ..Default::default()
            })),
            ..Default::default()
        };
        let Some(enums::MessageMedia::Document(d)) = to_tl(&document) else {
            panic!("not a document");
        };
        assert!(d.voice && !d.video);
        let Some(enums::Document::Document(d)) = d.document else {
            panic!("no document");
        };
        assert_eq!((d.id, d.size, d.access_hash, d.dc_id), (11, 900, 255, 1));
        assert_eq!(d.attributes.len(), 2);
        assert!(matches!(&d.attributes[0],
            enums::DocumentAttribute::Audio(a) if a.voice && a.duration == 3 && a.waveform.as_deref() == Some(&[1, 2][..])));
        let location = Location::decode(&d.file_reference);
        assert_eq!(
            location.map(|l| (l.peer, l.msg_id, l.reference)),
            Some((3, 5, vec![7; 24]))
        );

        let photo = ox::Message {
            id: 6,
            peer_id: Some(ox::Peer::user(3)),
            media: Some(Box::new(ox::MessageMedia {
                kind: Kind::Photo as i32,
                file_id: 12,
                stripped_thumb: vec![1, 2, 3],
                sizes: vec![ox::PhotoSize {
                    r#type: "s".into(),
                    w: 100,
                    h: 50,
                    size: 999,
                    file_id: 13,
                }],
                ..Default::default()
            })),
            ..Default::default()
        };
        let Some(enums::MessageMedia::Photo(p)) = to_tl(&photo) else {
            panic!("not a photo");
        };
        let Some(enums::Photo::Photo(p)) = p.photo else {
            panic!("no photo");
        };
        assert!(matches!(p.sizes.as_slice(), [
            enums::PhotoSize::PhotoStrippedSize(i),
            enums::PhotoSize::Size(s),
        ] if i.r#type == "i" && s.r#type == "s" && s.size == 999));
        assert_eq!(to_tl(&ox::Message::default()), None);
    }
}
