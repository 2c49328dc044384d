//! What the MTProto suites and the door's bench ask of a signed-out MTProto client: a sign-up
//! of a new phone or a sign-in to an existing account with the harness's login code, a plain
//! text send, and files: an upload in parts, a document sent, and a download in
//! `upload.getFile` chunks.

use oxigram_mtproto::client::{Client, ClientError};
use oxigram_tl::{enums, functions, types};

use crate::LOGIN_CODE;

/// `auth.sendCode` for `phone`: the phone_code_hash of the code it sent.
async fn send_code(client: &mut Client, phone: &str) -> anyhow::Result<String> {
    let enums::auth::SentCode::Code(sent) = client
        .invoke(&functions::auth::SendCode {
            phone_number: phone.into(),
            api_id: 1,
            api_hash: "x".into(),
            settings: enums::CodeSettings::Settings(types::CodeSettings {
                allow_flashcall: false,
                current_number: false,
                allow_app_hash: false,
                allow_missed_call: false,
                allow_firebase: false,
                unknown_number: false,
                logout_tokens: None,
                token: None,
                app_sandbox: None,
            }),
        })
        .await?
    else {
        anyhow::bail!("no code sent");
    };
    Ok(sent.phone_code_hash)
}

/// Signs `client` up as a new account for `phone` (sendCode, signIn answering that a sign-up
/// is needed, signUp) and returns the new self user.
pub async fn sign_up(
    client: &mut Client,
    phone: &str,
    first_name: &str,
) -> anyhow::Result<types::User> {
    let phone_code_hash = send_code(client, phone).await?;
    let signed_in = client
        .invoke(&functions::auth::SignIn {
            phone_number: phone.into(),
            phone_code_hash: phone_code_hash.clone(),
            phone_code: Some(LOGIN_CODE.into()),
            email_verification: None,
        })
        .await?;
    anyhow::ensure!(
        matches!(signed_in, enums::auth::Authorization::SignUpRequired(_)),
        "a new phone must need a sign-up: {signed_in:?}"
    );
    let enums::auth::Authorization::Authorization(done) = client
        .invoke(&functions::auth::SignUp {
            no_joined_notifications: false,
            phone_number: phone.into(),
            phone_code_hash,
            first_name: first_name.into(),
            last_name: String::new(),
        })
        .await?
    else {
        anyhow::bail!("sign-up did not authorize");
    };
    let enums::User::User(user) = done.user else {
        anyhow::bail!("empty user");
    };
    Ok(user)
}

/// Signs `client` in to the existing account of `phone` (sendCode, signIn) and returns the
/// self user.
pub async fn sign_in(client: &mut Client, phone: &str) -> anyhow::Result<types::User> {
    let phone_code_hash = send_code(client, phone).await?;
    let signed_in = client
        .invoke(&functions::auth::SignIn {
            phone_number: phone.into(),
            phone_code_hash,
            phone_code: Some(LOGIN_CODE.into()),
            email_verification: None,
        })
        .await?;
    let enums::auth::Authorization::Authorization(done) = signed_in else {
        anyhow::bail!("{phone} has no account to sign in to: {signed_in:?}");
    };
    let enums::User::User(user) = done.user else {
        anyhow::bail!("empty user");
    };
    Ok(user)
}

/// `messages.sendMessage` of a plain `text` to `peer`, every option off.
pub fn send_text(
    peer: enums::InputPeer,
    text: &str,
    random_id: i64,
) -> functions::messages::SendMessage {
    functions::messages::SendMessage {
        no_webpage: false,
        silent: false,
        background: false,
        clear_draft: false,
        noforwards: false,
        update_stickersets_order: false,
        invert_media: false,
        allow_paid_floodskip: false,
        peer,
        reply_to: None,
        message: text.into(),
        random_id,
        reply_markup: None,
        entities: None,
        schedule_date: None,
        schedule_repeat_period: None,
        send_as: None,
        quick_reply_shortcut: None,
        effect: None,
        allow_paid_stars: None,
        suggested_post: None,
        rich_message: None,
    }
}

/// Uploads `bytes` as the client's file `file_id` in parts of `part_size` bytes
/// (`upload.saveFilePart`); the `inputFile` a send names it by.
pub async fn upload(
    client: &mut Client,
    file_id: i64,
    bytes: &[u8],
    part_size: usize,
    name: &str,
) -> anyhow::Result<enums::InputFile> {
    let mut parts = 0;
    for (part, chunk) in bytes.chunks(part_size).enumerate() {
        let saved = client
            .invoke(&functions::upload::SaveFilePart {
                file_id,
                file_part: i32::try_from(part)?,
                bytes: chunk.to_vec(),
            })
            .await?;
        anyhow::ensure!(saved, "part {part} not saved");
        parts += 1;
    }
    Ok(enums::InputFile::File(types::InputFile {
        id: file_id,
        parts,
        name: name.into(),
        md5_checksum: String::new(),
    }))
}

/// `messages.sendMedia` of an uploaded document named `file_name`, with `caption`.
pub fn send_document(
    peer: enums::InputPeer,
    file: enums::InputFile,
    mime_type: &str,
    file_name: &str,
    caption: &str,
    random_id: i64,
) -> functions::messages::SendMedia {
    functions::messages::SendMedia {
        silent: false,
        background: false,
        clear_draft: false,
        noforwards: false,
        update_stickersets_order: false,
        invert_media: false,
        allow_paid_floodskip: false,
        peer,
        reply_to: None,
        media: enums::InputMedia::UploadedDocument(types::InputMediaUploadedDocument {
            nosound_video: false,
            force_file: false,
            spoiler: false,
            file,
            thumb: None,
            mime_type: mime_type.into(),
            attributes: vec![enums::DocumentAttribute::Filename(
                types::DocumentAttributeFilename {
                    file_name: file_name.into(),
                },
            )],
            stickers: None,
            video_cover: None,
            video_timestamp: None,
            ttl_seconds: None,
        }),
        message: caption.into(),
        random_id,
        reply_markup: None,
        entities: None,
        schedule_date: None,
        schedule_repeat_period: None,
        send_as: None,
        quick_reply_shortcut: None,
        effect: None,
        allow_paid_stars: None,
        suggested_post: None,
    }
}

/// The document of the first new message an `Updates` carries.
pub fn document_of(updates: &enums::Updates) -> Option<types::Document> {
    let enums::Updates::Updates(updates) = updates else {
        return None;
    };
    updates.updates.iter().find_map(|u| match u {
        enums::Update::NewMessage(new) => match &new.message {
            enums::Message::Message(m) => match &m.media {
                Some(enums::MessageMedia::Document(d)) => match &d.document {
                    Some(enums::Document::Document(d)) => Some(d.clone()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        },
        _ => None,
    })
}

/// Where a document's file is, as Telegram clients ask for it.
pub fn document_location(document: &types::Document) -> enums::InputFileLocation {
    enums::InputFileLocation::InputDocumentFileLocation(types::InputDocumentFileLocation {
        id: document.id,
        access_hash: document.access_hash,
        file_reference: document.file_reference.clone(),
        thumb_size: String::new(),
    })
}

/// One `upload.getFile` chunk.
pub async fn get_file(
    client: &mut Client,
    location: &enums::InputFileLocation,
    offset: i64,
    limit: i32,
) -> Result<Vec<u8>, ClientError> {
    let enums::upload::File::File(file) = client
        .invoke(&functions::upload::GetFile {
            precise: false,
            cdn_supported: false,
            location: location.clone(),
            offset,
            limit,
        })
        .await?
    else {
        return Ok(Vec::new());
    };
    Ok(file.bytes)
}

/// A whole file, in `limit`-byte chunks until a short one.
pub async fn download(
    client: &mut Client,
    location: &enums::InputFileLocation,
    limit: i32,
) -> Result<Vec<u8>, ClientError> {
    let mut bytes = Vec::new();
    loop {
        let chunk = get_file(client, location, bytes.len() as i64, limit).await?;
        let short = chunk.len() < limit as usize;
        bytes.extend(chunk);
        if short {
            return Ok(bytes);
        }
    }
}
