//! The MTProto front door against the whole system: the crate's own Rust client and the stock
//! Telethon 1.45 (installed into a cached venv by `scripts/install-telethon.sh`) create auth
//! keys, sign up and call the API; an MTProto key is an auth key of the gateway's accounts,
//! seen by the gRPC door's authorizations and ended by either door's logout. Files go up in
//! parts, are sent as documents and photos and come down only to the readers of their message,
//! within Telegram's download windows; a missing part is named by its number, albums arrive
//! grouped or not at all, and files are sent again by id; contacts are listed with Telegram's
//! hash. `help.getConfig` names the configured public address, not the one the door binds.

use std::process::Command;

use anyhow::Context;
use oxigram_mtproto::ServerKey;
use oxigram_mtproto::client::{Client, ClientError, Options};
use oxigram_proto::api::v1::GetAuthorizationsRequest;
use oxigram_tests::mtproto::{
    document_location, document_of, download, get_file, send_document, send_text, sign_up, upload,
};
use oxigram_tests::{LOGIN_CODE, Mode, System, free_port};
use oxigram_tl::{enums, functions, types};
use sha2::Digest;

/// A system with the door open on a free port; the server key's public PEM is returned.
pub(crate) async fn system_with_door() -> anyhow::Result<(System, ServerKey, u16)> {
    let (mut config, ground) = System::config().await?;
    let key = ServerKey::generate()?;
    let pem = ground.dir.join("mtproto_rsa.pem");
    std::fs::write(&pem, key.private_pem()?)?;
    let port = free_port()?;
    config.mtproto.listen = Some(([127, 0, 0, 1], port).into());
    config.mtproto.rsa_key_file = Some(pem.display().to_string());
    let system = System::start_with(config, ground, Mode::OneProcess).await?;
    Ok((system, key, port))
}

pub(crate) async fn connect(key: &ServerKey, port: u16) -> anyhow::Result<Client> {
    // The door opens with the gateway; give it a moment on slow machines.
    for _ in 0..50 {
        match Client::connect(
            &format!("127.0.0.1:{port}"),
            key.public(),
            Options::default(),
        )
        .await
        {
            Ok(client) => return Ok(client),
            Err(ClientError::Io(_)) => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            Err(error) => return Err(error.into()),
        }
    }
    anyhow::bail!("MTProto door never opened")
}

/// The latest ten messages with `peer`.
pub(crate) fn latest(peer: enums::InputPeer) -> functions::messages::GetHistory {
    functions::messages::GetHistory {
        peer,
        offset_id: 0,
        offset_date: 0,
        add_offset: 0,
        limit: 10,
        max_id: 0,
        min_id: 0,
        hash: 0,
    }
}

async fn me(client: &mut Client) -> Result<Vec<enums::User>, ClientError> {
    client
        .invoke(&functions::users::GetUsers {
            id: vec![enums::InputUser::UserSelf],
        })
        .await
}

#[tokio::test]
async fn an_mtproto_key_is_an_auth_key_of_the_accounts() -> anyhow::Result<()> {
    let (system, key, port) = system_with_door().await?;
    let mut client = connect(&key, port).await?;
    // Before sign-in, the self user is a 401 (what stock clients probe with).
    let early = me(&mut client).await;
    assert!(
        matches!(early, Err(ClientError::Rpc(ref e)) if e.code == 401 && e.message == "AUTH_KEY_UNREGISTERED"),
        "{early:?}"
    );
    let user = sign_up(&mut client, "15550100", "Rust").await?;
    assert!(user.is_self);
    assert_eq!(user.first_name.as_deref(), Some("Rust"));
    let users = me(&mut client).await?;
    assert!(matches!(users.as_slice(), [enums::User::User(u)] if u.id == user.id));

    // A message to her Saved Messages, answered as Telegram does, and read back.
    let sent = client
        .invoke(&send_text(
            enums::InputPeer::PeerSelf,
            "hello over MTProto",
            77,
        ))
        .await?;
    let enums::Updates::UpdateShortSentMessage(sent) = sent else {
        anyhow::bail!("send answered {sent:?}");
    };
    assert!(sent.out);
    // pts shifted by one on this door: a fresh account is at 1, its first message makes 2.
    assert_eq!((sent.pts, sent.pts_count), (2, 1));
    let history = client.invoke(&latest(enums::InputPeer::PeerSelf)).await?;
    let enums::messages::Messages::Messages(history) = history else {
        anyhow::bail!("history answered {history:?}");
    };
    let texts: Vec<(i32, String)> = history
        .messages
        .iter()
        .filter_map(|m| match m {
            enums::Message::Message(m) => Some((m.id, m.message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(texts, vec![(sent.id, "hello over MTProto".to_owned())]);
    // Another user's chat is refused with Telegram's name for it.
    let nobody = client
        .invoke(&latest(enums::InputPeer::Chat(types::InputPeerChat {
            chat_id: 5,
        })))
        .await;
    assert!(
        matches!(nobody, Err(ClientError::Rpc(ref e)) if e.code == 400 && e.message == "PEER_ID_INVALID"),
        "{nobody:?}"
    );

    // The same account on the gRPC door lists the MTProto key among its authorizations.
    let mut grpc = system.device().await?;
    let same = grpc.sign_in("15550100").await?;
    assert_eq!(same.id, user.id);
    let keys = grpc
        .auth()
        .get_authorizations(GetAuthorizationsRequest {})
        .await?
        .into_inner();
    let listed = keys
        .authorizations
        .iter()
        .find(|a| a.auth_key_id == client.auth_key().id());
    // With the device its initConnection named.
    assert_eq!(
        listed.map(|a| a.device_model.as_str()),
        Some("oxigram-mtproto-client"),
        "{keys:?}"
    );

    // Logging out on the MTProto door unbinds the key for both doors.
    client.invoke(&functions::auth::LogOut {}).await?;
    let after = me(&mut client).await;
    assert!(
        matches!(after, Err(ClientError::Rpc(ref e)) if e.code == 401),
        "{after:?}"
    );
    // An unmapped method is an rpc_error, never a dropped connection.
    let unsupported = client
        .invoke(&functions::help::GetAppConfig { hash: 0 })
        .await;
    assert!(
        matches!(unsupported, Err(ClientError::Rpc(ref e)) if e.code == 400 && e.message == "METHOD_NOT_SUPPORTED"),
        "{unsupported:?}"
    );
    let enums::NearestDc::Dc(dc) = client.invoke(&functions::help::GetNearestDc {}).await?;
    assert_eq!(dc.this_dc, 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_get_config_names_the_public_address_not_every_interface() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    let server = ServerKey::generate()?;
    let pem = ground.dir.join("mtproto_rsa.pem");
    std::fs::write(&pem, server.private_pem()?)?;
    let port = free_port()?;
    // Bound on every interface, as a server behind a load balancer is.
    config.mtproto.listen = Some(([0, 0, 0, 0], port).into());
    config.mtproto.rsa_key_file = Some(pem.display().to_string());
    config.mtproto.public_host = Some("198.51.100.7".into());
    config.mtproto.public_port = Some(443);
    let _system = System::start_with(config, ground, Mode::OneProcess).await?;

    let mut client = connect(&server, port).await?;
    let enums::Config::Config(told) = client.invoke(&functions::help::GetConfig {}).await?;
    let options: Vec<(String, i32, bool)> = told
        .dc_options
        .iter()
        .map(|o| match o {
            enums::DcOption::Option(o) => (o.ip_address.clone(), o.port, o.ipv6),
        })
        .collect();
    assert_eq!(options, vec![("198.51.100.7".to_owned(), 443, false)]);
    assert_eq!(told.this_dc, 1);
    Ok(())
}

/// The venv python of Telethon 1.45 (installed on first use) and the repository root.
pub(crate) fn telethon() -> anyhow::Result<(String, std::path::PathBuf)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let install = Command::new("bash")
        .arg(root.join("scripts/install-telethon.sh"))
        .output()
        .context("running scripts/install-telethon.sh")?;
    anyhow::ensure!(
        install.status.success(),
        "installing Telethon: {}",
        String::from_utf8_lossy(&install.stderr)
    );
    Ok((String::from_utf8(install.stdout)?.trim().to_owned(), root))
}

/// The server key's public PEM in a file of its own, for a Telethon script.
fn public_pem_file(key: &ServerKey) -> anyhow::Result<std::path::PathBuf> {
    let pem = std::env::temp_dir().join(oxigram_tests::unique_name("mtproto-pub"));
    std::fs::write(&pem, key.public_pem()?)?;
    Ok(pem)
}

/// A Telethon script of tests/telethon running beside the test, which reads the JSON lines the
/// script prints as it goes (and acts between them).
pub(crate) struct Telethon {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    pem: std::path::PathBuf,
}

impl Telethon {
    /// Starts `script` with the server's public key and the door's port, then `args`.
    pub(crate) fn spawn(
        key: &ServerKey,
        port: u16,
        script: &str,
        args: &[&str],
    ) -> anyhow::Result<Self> {
        use tokio::io::AsyncBufReadExt;

        let (python, root) = telethon()?;
        let pem = public_pem_file(key)?;
        let mut child = tokio::process::Command::new(&python)
            .arg(root.join("tests/telethon").join(script))
            .arg(&pem)
            .arg(port.to_string())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("no stdout")?;
        let lines = tokio::io::BufReader::new(stdout).lines();
        Ok(Self { child, lines, pem })
    }

    /// The script's next stdout line as JSON, within 120 s; `what` says what it tells.
    pub(crate) async fn next(&mut self, what: &str) -> anyhow::Result<serde_json::Value> {
        let within = std::time::Duration::from_secs(120);
        let line = tokio::time::timeout(within, self.lines.next_line())
            .await
            .with_context(|| format!("Telethon never told {what}"))??;
        match line {
            Some(line) => serde_json::from_str(&line)
                .with_context(|| format!("Telethon told {what} as {line:?}")),
            None => anyhow::bail!(
                "Telethon ended before it told {what}: {}",
                self.stderr().await
            ),
        }
    }

    /// Waits for the script to exit, which must be a success.
    pub(crate) async fn finish(mut self) -> anyhow::Result<()> {
        let within = std::time::Duration::from_secs(60);
        let status = tokio::time::timeout(within, self.child.wait())
            .await
            .context("Telethon never exited")??;
        anyhow::ensure!(status.success(), "Telethon failed: {}", self.stderr().await);
        Ok(())
    }

    /// What the script wrote to stderr (once it has closed it).
    async fn stderr(&mut self) -> String {
        use tokio::io::AsyncReadExt;

        let mut text = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let read = stderr.read_to_string(&mut text);
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), read).await;
        }
        text
    }
}

impl Drop for Telethon {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pem);
    }
}

/// Runs a Telethon script of tests/telethon to its end; its last stdout line is JSON.
async fn run_telethon(
    key: &ServerKey,
    port: u16,
    script: &str,
    args: &[&str],
) -> anyhow::Result<serde_json::Value> {
    let (python, root) = telethon()?;
    let pem = public_pem_file(key)?;
    let run = tokio::process::Command::new(&python)
        .arg(root.join("tests/telethon").join(script))
        .arg(&pem)
        .arg(port.to_string())
        .args(args)
        .kill_on_drop(true)
        .output();
    let run = tokio::time::timeout(std::time::Duration::from_secs(240), run).await;
    let _ = std::fs::remove_file(&pem);
    let run = run.context("Telethon timed out")??;
    let stdout = String::from_utf8_lossy(&run.stdout);
    anyhow::ensure!(
        run.status.success(),
        "Telethon {script} failed: {stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    Ok(serde_json::from_str(last.trim())?)
}

#[tokio::test]
async fn stock_telethon_signs_up_and_reads_itself() -> anyhow::Result<()> {
    let (_system, key, port) = system_with_door().await?;
    let seen = run_telethon(&key, port, "sign_up.py", &["+15550200", LOGIN_CODE]).await?;
    assert_eq!(seen["authorized_before"], false);
    assert_eq!(seen["sign_in"], "sign up required");
    assert_eq!(seen["first_name"], "Telethon");
    assert_eq!(seen["phone"], "15550200");
    assert_eq!(seen["is_self"], true);
    assert_eq!(
        seen["unsupported"],
        serde_json::json!([400, "METHOD_NOT_SUPPORTED"])
    );
    assert_eq!(seen["me_again"], seen["id"]);
    Ok(())
}

#[tokio::test]
async fn stock_telethon_users_chat_edit_delete_and_catch_up() -> anyhow::Result<()> {
    let (_system, key, port) = system_with_door().await?;
    let seen = run_telethon(
        &key,
        port,
        "chat.py",
        &["+15550301", "+15550302", LOGIN_CODE],
    )
    .await?;
    let ids = seen["ids"].as_array().cloned().unwrap_or_default();
    assert_eq!(seen["imported"], serde_json::json!([[7, ids[0]]]));
    assert_eq!(seen["ann_got"], "hello Ann");
    assert_eq!(seen["bob_got"], "hi Bob");
    assert_eq!(
        seen["formatted"],
        serde_json::json!(["bold move", [["MessageEntityBold", 0, 4]]])
    );
    assert_eq!(
        seen["edit"],
        serde_json::json!([true, "hello Ann (edited)"])
    );
    assert_eq!(seen["deleted"], true);
    assert_eq!(seen["dropped"], true);
    assert_eq!(
        seen["caught_up"],
        serde_json::json!(["while you were away 1", "while you were away 2"])
    );
    assert_eq!(
        seen["history"],
        serde_json::json!([
            "while you were away 2",
            "while you were away 1",
            "bold move",
            "hi Bob",
            "hello Ann (edited)"
        ])
    );
    let dialogs = seen["dialogs"].as_array().cloned().unwrap_or_default();
    assert!(
        dialogs.contains(&serde_json::json!([ids[1], "while you were away 2"])),
        "{dialogs:?}"
    );
    assert_eq!(
        seen["search"],
        serde_json::json!(["while you were away 2", "while you were away 1"])
    );
    // The second id was deleted: Telethon shows it as missing.
    assert_eq!(
        seen["get_messages"],
        serde_json::json!(["while you were away 1", null])
    );
    assert_eq!(
        seen["forwarded"],
        serde_json::json!(["while you were away 1", ids[1]])
    );
    assert_eq!(seen["full_user"], ids[1]);
    assert_eq!(seen["peer_dialog_unread"], 3);
    assert_eq!(seen["authorizations"], serde_json::json!([true]));
    assert_eq!(seen["read_up_to_latest"], true);
    assert_eq!(seen["unread_after_read"], 0);
    Ok(())
}

#[tokio::test]
async fn stock_telethon_sends_and_downloads_files_and_lists_contacts() -> anyhow::Result<()> {
    let (_system, key, port) = system_with_door().await?;
    // A JPEG photo for Telethon to send (the venv has no imaging library of its own).
    let picture = image::RgbImage::from_fn(400, 300, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 90])
    });
    let jpeg = std::env::temp_dir().join(format!("{}.jpg", oxigram_tests::unique_name("photo")));
    picture.save_with_format(&jpeg, image::ImageFormat::Jpeg)?;
    let jpeg_arg = jpeg.display().to_string();
    let seen = run_telethon(
        &key,
        port,
        "media.py",
        &["+15550701", "+15550702", LOGIN_CODE, &jpeg_arg],
    )
    .await;
    let _ = std::fs::remove_file(&jpeg);
    let seen = seen?;
    let ids = seen["ids"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        seen["contacts"],
        serde_json::json!([[ids[1], true, "Bobby"]])
    );
    assert_eq!(seen["mutual"], serde_json::json!([false]));
    assert_eq!(seen["contacts_not_modified"], true);
    assert_eq!(
        seen["sent_document"],
        serde_json::json!(["report.bin", 1_572_864])
    );
    assert_eq!(
        seen["document"],
        serde_json::json!({
            "caption": "the report",
            "name": "report.bin",
            "size": 1_572_864,
            "mime": "application/octet-stream",
            "same_bytes": true,
        })
    );
    // 400 × 300: the smallest two tiers ("s", "m"), after the inline preview.
    assert_eq!(
        seen["photo"],
        serde_json::json!({
            "caption": "a photo",
            "kinds": ["PhotoStrippedSize", "PhotoSize", "PhotoSize"],
            "jpeg": true,
            "largest": true,
        })
    );
    assert_eq!(
        seen["voice"],
        serde_json::json!({"voice": true, "duration": 3, "waveform": [1, 2, 3, 4], "same_bytes": true})
    );
    assert_eq!(
        seen["history"],
        serde_json::json!([
            "MessageMediaDocument",
            "MessageMediaPhoto",
            "MessageMediaDocument"
        ])
    );
    // The album: sent and received as one group, in order, each with its caption.
    assert_eq!(
        seen["album"],
        serde_json::json!({
            "sent": ["first", "second", "third"],
            "captions": ["first", "second", "third"],
            "grouped": true,
            "sent_grouped": true,
            "kinds": ["MessageMediaPhoto", "MessageMediaPhoto", "MessageMediaPhoto"],
        })
    );
    Ok(())
}

#[tokio::test]
async fn a_telethon_user_chats_with_a_grpc_user() -> anyhow::Result<()> {
    let (system, key, port) = system_with_door().await?;
    let mut gina = system.device().await?;
    gina.sign_up("15550401", "Gina").await?;
    let mut gina_stream = gina.stream(0).await?;

    let mut script = Telethon::spawn(
        &key,
        port,
        "with_grpc.py",
        &["+15550402", LOGIN_CODE, "+15550401"],
    )?;
    let ready = script.next("it is ready").await?;
    let tom = ready["ready"].as_i64().context("no Telethon user id")?;
    assert_eq!(ready["peer"].as_i64(), Some(gina.user_id()?));

    // Gina's gRPC stream gets Tom's message.
    let from_tom = oxigram_tests::client::next_update_where(&mut gina_stream, |kind| match kind {
        oxigram_proto::types::v1::update::Kind::NewMessage(n) => n.message,
        _ => None,
    })
    .await?;
    assert_eq!(from_tom.text, "from telethon");
    assert_eq!(from_tom.from_user_id, tom);

    // Tom is signed in on the gRPC door too: that device and Telethon both get Gina's answer.
    let mut tom_grpc = system.device().await?;
    assert_eq!(tom_grpc.sign_in("15550402").await?.id, tom);
    let mut tom_stream = tom_grpc.stream(0).await?;
    gina.send(tom, 11, "from grpc").await?;
    let on_grpc = oxigram_tests::client::next_update_where(&mut tom_stream, |kind| match kind {
        oxigram_proto::types::v1::update::Kind::NewMessage(n) => n.message,
        _ => None,
    })
    .await?;
    assert_eq!(on_grpc.text, "from grpc");
    // A file sent on the gRPC door: Telethon downloads the same bytes through its message.
    let bytes: Vec<u8> = (0..700_000u32).map(|i| (i * 7 % 253) as u8).collect();
    let file = gina.upload(1, &bytes, "grpc.bin").await?;
    let media = oxigram_proto::api::v1::InputMedia {
        kind: oxigram_proto::types::v1::message_media::Kind::Document as i32,
        file_id: file.id,
        mime_type: "application/octet-stream".into(),
        file_name: "grpc.bin".into(),
        ..Default::default()
    };
    oxigram_proto::api::v1::messages_client::MessagesClient::new(gina.channel())
        .send_media(oxigram_proto::api::v1::SendMediaRequest {
            peer: Some(oxigram_proto::types::v1::InputPeer::user(tom)),
            multi_media: vec![oxigram_proto::api::v1::InputSingleMedia {
                media: Some(media),
                random_id: 12,
                caption: "a file from grpc".into(),
                entities: vec![],
            }],
            ..Default::default()
        })
        .await?;

    let seen = script.next("what it saw").await?;
    script.finish().await?;
    assert_eq!(
        seen["got"],
        serde_json::json!(["from grpc", "a file from grpc"])
    );
    assert_eq!(
        seen["file"],
        serde_json::json!(["grpc.bin", hex::encode(sha2::Sha256::digest(&bytes))])
    );
    assert_eq!(
        seen["history"],
        serde_json::json!(["a file from grpc", "from grpc", "from telethon"])
    );
    // Both doors see the same chat.
    let gina_history: Vec<String> = gina
        .history(tom)
        .await?
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(
        gina_history,
        vec!["a file from grpc", "from grpc", "from telethon"]
    );
    Ok(())
}

/// `updates.getDifference` from a door pts, with no limits.
pub(crate) fn difference_from(pts: i32) -> functions::updates::GetDifference {
    functions::updates::GetDifference {
        pts,
        pts_limit: None,
        pts_total_limit: None,
        date: 0,
        qts: 0,
        qts_limit: None,
    }
}

/// The next pushed Updates, within 15 s.
pub(crate) async fn next_updates(client: &mut Client) -> anyhow::Result<enums::Updates> {
    use oxigram_tl::Deserializable;
    let push = tokio::time::timeout(std::time::Duration::from_secs(15), client.next_push())
        .await
        .context("no push within 15 s")??;
    Ok(enums::Updates::deserialize(
        &mut oxigram_tl::Cursor::from_slice(&push),
    )?)
}

#[tokio::test]
async fn mtproto_sessions_get_pushes_and_differences() -> anyhow::Result<()> {
    let (_system, key, port) = system_with_door().await?;
    let mut ann = connect(&key, port).await?;
    let mut bob = connect(&key, port).await?;
    let ann_user = sign_up(&mut ann, "15550501", "Rust").await?;
    let bob_user = sign_up(&mut bob, "15550502", "Rust").await?;
    // A fresh account is at pts 1 on this door (Telegram clients take 0 for "no state").
    let enums::updates::State::State(state) = bob.invoke(&functions::updates::GetState {}).await?;
    assert_eq!(state.pts, 1);
    let to_bob = enums::InputPeer::User(types::InputPeerUser {
        user_id: bob_user.id,
        access_hash: 0,
    });

    // The first message from Ann comes with Ann; the next as updateShortMessage.
    ann.invoke(&send_text(to_bob.clone(), "one", 1)).await?;
    let enums::Updates::Updates(first) = next_updates(&mut bob).await? else {
        anyhow::bail!("the first push is not updates with users");
    };
    assert!(
        matches!(first.users.as_slice(), [enums::User::User(u)] if u.id == ann_user.id),
        "{first:?}"
    );
    let [enums::Update::NewMessage(new)] = first.updates.as_slice() else {
        anyhow::bail!("{first:?}");
    };
    assert_eq!((new.pts, new.pts_count), (2, 1));
    ann.invoke(&send_text(to_bob.clone(), "two", 2)).await?;
    let enums::Updates::UpdateShortMessage(short) = next_updates(&mut bob).await? else {
        anyhow::bail!("the second push is not updateShortMessage");
    };
    assert_eq!(
        (short.message.as_str(), short.user_id, short.out, short.pts),
        ("two", ann_user.id, false, 3)
    );

    // Ann edits and deletes: pushes over the next pts.
    let edited = ann
        .invoke(&functions::messages::EditMessage {
            no_webpage: false,
            invert_media: false,
            peer: to_bob.clone(),
            id: 1,
            message: Some("one, edited".into()),
            media: None,
            reply_markup: None,
            entities: None,
            schedule_date: None,
            schedule_repeat_period: None,
            quick_reply_shortcut_id: None,
            rich_message: None,
        })
        .await?;
    assert!(matches!(edited, enums::Updates::Updates(ref u)
        if matches!(u.updates.as_slice(), [enums::Update::EditMessage(_)])));
    let enums::Updates::Updates(edit) = next_updates(&mut bob).await? else {
        anyhow::bail!("the edit push");
    };
    let [enums::Update::EditMessage(edit)] = edit.updates.as_slice() else {
        anyhow::bail!("{edit:?}");
    };
    assert_eq!(edit.pts, 4);
    let enums::messages::AffectedMessages::Messages(deleted) = ann
        .invoke(&functions::messages::DeleteMessages {
            revoke: true,
            id: vec![2],
        })
        .await?;
    assert_eq!(deleted.pts_count, 1);
    let enums::Updates::UpdateShort(short) = next_updates(&mut bob).await? else {
        anyhow::bail!("the delete push");
    };
    assert!(
        matches!(&short.update, enums::Update::DeleteMessages(d) if d.messages == vec![2] && d.pts == 5),
        "{short:?}"
    );

    // Bob's difference from his first state: the message left in its current state, the
    // edit and the delete as other updates, Ann among the users.
    let difference = bob.invoke(&difference_from(1)).await?;
    let enums::updates::Difference::Difference(difference) = difference else {
        anyhow::bail!("{difference:?}");
    };
    let texts: Vec<&str> = difference
        .new_messages
        .iter()
        .filter_map(|m| match m {
            enums::Message::Message(m) => Some(m.message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, vec!["one, edited"]);
    assert_eq!(
        difference.other_updates.len(),
        3,
        "{:?}",
        difference.other_updates
    );
    let enums::updates::State::State(state) = &difference.state;
    assert_eq!(state.pts, 5);
    assert!(
        difference
            .users
            .iter()
            .any(|u| matches!(u, enums::User::User(u) if u.id == ann_user.id))
    );
    // A smaller page when asked: a slice up to its intermediate state.
    let slice = bob
        .invoke(&functions::updates::GetDifference {
            pts: 1,
            pts_limit: None,
            pts_total_limit: Some(2),
            date: 0,
            qts: 0,
            qts_limit: None,
        })
        .await?;
    let enums::updates::Difference::Slice(slice) = slice else {
        anyhow::bail!("{slice:?}");
    };
    let enums::updates::State::State(intermediate) = &slice.intermediate_state;
    assert_eq!(intermediate.pts, 3);
    // Nothing new since: differenceEmpty.
    let empty = bob.invoke(&difference_from(5)).await?;
    assert!(
        matches!(empty, enums::updates::Difference::Empty(_)),
        "{empty:?}"
    );

    // The door's metrics count the calls, the feeds and the pushes.
    let metrics = oxigram_telemetry::metrics::render();
    let sample = |series: &str| {
        metrics.lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            value.parse::<f64>().ok()
        })
    };
    assert_eq!(
        sample(r#"oxigram_mtproto_calls_total{method="messages.sendMessage",result="ok"}"#),
        Some(2.0),
        "{metrics}"
    );
    assert!(sample("oxigram_mtproto_feeds_open").is_some_and(|v| v >= 2.0));
    assert!(sample("oxigram_mtproto_pushes_total").is_some_and(|v| v >= 4.0));
    assert!(sample("oxigram_mtproto_call_duration_seconds_count").is_some_and(|v| v > 5.0));
    Ok(())
}

/// The refusal of an MTProto call, as (number, name).
fn rpc_refusal<T: std::fmt::Debug>(result: Result<T, ClientError>) -> Option<(i32, String)> {
    match result {
        Err(ClientError::Rpc(e)) => Some((e.code, e.message)),
        _ => None,
    }
}

#[tokio::test]
async fn mtproto_files_go_up_in_parts_and_down_only_to_their_readers() -> anyhow::Result<()> {
    let (_system, key, port) = system_with_door().await?;
    let mut ann = connect(&key, port).await?;
    let mut bob = connect(&key, port).await?;
    let mut cat = connect(&key, port).await?;
    sign_up(&mut ann, "15550601", "Ann").await?;
    let bob_user = sign_up(&mut bob, "15550602", "Bob").await?;
    sign_up(&mut cat, "15550603", "Cat").await?;
    let to_bob = enums::InputPeer::User(types::InputPeerUser {
        user_id: bob_user.id,
        access_hash: 0,
    });

    // Parts refused with Telegram's names.
    let part = |file_part, bytes| functions::upload::SaveFilePart {
        file_id: 1,
        file_part,
        bytes,
    };
    let big = |file_part, file_total_parts| functions::upload::SaveBigFilePart {
        file_id: 2,
        file_part,
        file_total_parts,
        bytes: vec![1; 10],
    };
    let bad_part = [
        (
            rpc_refusal(ann.invoke(&part(0, Vec::new())).await),
            "FILE_PART_EMPTY",
        ),
        (
            rpc_refusal(ann.invoke(&part(0, vec![0; 512 * 1024 + 1])).await),
            "FILE_PART_TOO_BIG",
        ),
        (
            rpc_refusal(ann.invoke(&part(8000, vec![1])).await),
            "FILE_PART_INVALID",
        ),
        (
            rpc_refusal(ann.invoke(&big(0, 0)).await),
            "FILE_PARTS_INVALID",
        ),
        (
            rpc_refusal(ann.invoke(&big(3, 3)).await),
            "FILE_PART_INVALID",
        ),
    ];
    for (refused, name) in bad_part {
        assert_eq!(refused, Some((400, name.to_owned())));
    }
    assert!(ann.invoke(&big(0, 1)).await?);

    // 1.25 MiB in 512 KiB parts, sent as a document: the answer carries its id and message.
    let bytes: Vec<u8> = (0..1_310_720u32).map(|i| (i * 31 % 251) as u8).collect();
    let file = upload(&mut ann, 77, &bytes, 512 * 1024, "data.bin").await?;
    let send = send_document(
        to_bob.clone(),
        file.clone(),
        "application/octet-stream",
        "data.bin",
        "the data",
        901,
    );
    let sent = ann.invoke(&send).await?;
    let mine = document_of(&sent).context("the answer has no document")?;
    assert_eq!(
        (mine.size, mine.mime_type.as_str()),
        (bytes.len() as i64, "application/octet-stream")
    );
    let enums::Updates::Updates(answer) = &sent else {
        anyhow::bail!("{sent:?}");
    };
    assert!(
        matches!(answer.updates.first(), Some(enums::Update::MessageId(m)) if m.random_id == 901)
    );
    // The same send again (same file, same random_id) is the same message.
    let again = ann.invoke(&send).await?;
    let id_of = |u: &enums::Updates| match u {
        enums::Updates::Updates(u) => u.updates.iter().find_map(|u| match u {
            enums::Update::MessageId(m) => Some(m.id),
            _ => None,
        }),
        _ => None,
    };
    assert_eq!(id_of(&again), id_of(&sent));
    // An upload whose parts were not all saved.
    let missing = enums::InputFile::File(types::InputFile {
        id: 78,
        parts: 2,
        name: "x".into(),
        md5_checksum: String::new(),
    });
    let incomplete = ann
        .invoke(&send_document(
            to_bob.clone(),
            missing,
            "text/plain",
            "x",
            "",
            902,
        ))
        .await;
    assert_eq!(
        rpc_refusal(incomplete),
        Some((400, "FILE_PART_0_MISSING".to_owned()))
    );

    // Bob gets it pushed with its document, and downloads exactly the bytes.
    // (Other pushes, a presence, may come first.)
    let mut pushed = next_updates(&mut bob).await?;
    for _ in 0..5 {
        if document_of(&pushed).is_some() {
            break;
        }
        pushed = next_updates(&mut bob).await?;
    }
    let document = document_of(&pushed).context("the push has no document")?;
    assert_eq!(document.size, bytes.len() as i64);
    assert!(document.attributes.iter().any(|a| matches!(a,
        enums::DocumentAttribute::Filename(f) if f.file_name == "data.bin")));
    let location = document_location(&document);
    assert_eq!(download(&mut bob, &location, 512 * 1024).await?, bytes);
    assert_eq!(download(&mut bob, &location, 1 << 20).await?, bytes);

    // Telegram's windows: 4 KiB steps, a limit dividing 1 MiB, no range across a MiB.
    let windows = [
        ((1000, 4096), "OFFSET_INVALID"),
        ((0, 12_288), "LIMIT_INVALID"),
        (((1 << 20) - 4096, 8192), "LIMIT_INVALID"),
        ((0, 0), "LIMIT_INVALID"),
    ];
    for ((offset, limit), name) in windows {
        let refused = rpc_refusal(get_file(&mut bob, &location, offset, limit).await);
        assert_eq!(refused, Some((400, name.to_owned())), "{offset} {limit}");
    }
    // A reference changed by its holder opens nothing.
    let mut forged = document.clone();
    if let Some(last) = forged.file_reference.last_mut() {
        *last ^= 1;
    }
    let refused = rpc_refusal(get_file(&mut bob, &document_location(&forged), 0, 4096).await);
    assert_eq!(refused, Some((400, "FILE_REFERENCE_INVALID".to_owned())));
    // Cat holds no such message: Bob's location names nothing of hers.
    let refused = rpc_refusal(get_file(&mut cat, &location, 0, 4096).await);
    assert_eq!(refused, Some((400, "LOCATION_INVALID".to_owned())));
    let garbage =
        enums::InputFileLocation::InputDocumentFileLocation(types::InputDocumentFileLocation {
            id: document.id,
            access_hash: document.access_hash,
            file_reference: vec![1, 2, 3],
            thumb_size: String::new(),
        });
    let refused = rpc_refusal(get_file(&mut cat, &garbage, 0, 4096).await);
    assert_eq!(refused, Some((400, "LOCATION_INVALID".to_owned())));

    // History shows the file too.
    let history = bob
        .invoke(&latest(enums::InputPeer::User(types::InputPeerUser {
            user_id: document_owner(&pushed).unwrap_or_default(),
            access_hash: 0,
        })))
        .await?;
    let enums::messages::Messages::Messages(history) = history else {
        anyhow::bail!("{history:?}");
    };
    assert!(
        matches!(history.messages.as_slice(), [enums::Message::Message(m)]
        if m.message == "the data" && matches!(m.media, Some(enums::MessageMedia::Document(_))))
    );

    // Ann replaces the file, keeping the caption (no `message`): Bob downloads the new one.
    let v2 = b"second version\n".repeat(300);
    let file = upload(&mut ann, 79, &v2, 4096, "v2.txt").await?;
    let media = send_document(to_bob.clone(), file, "text/plain", "v2.txt", "", 0).media;
    let edit = functions::messages::EditMessage {
        no_webpage: false,
        invert_media: false,
        peer: to_bob.clone(),
        id: id_of(&sent).context("no id")?,
        message: None,
        media: Some(media),
        reply_markup: None,
        entities: None,
        schedule_date: None,
        schedule_repeat_period: None,
        quick_reply_shortcut_id: None,
        rich_message: None,
    };
    let edited = ann.invoke(&edit).await?;
    let (caption, document) = edited_of(&edited).context("the edit has no document")?;
    assert_eq!(
        (caption.as_str(), document.size),
        ("the data", v2.len() as i64)
    );
    let mut pushed = next_updates(&mut bob).await?;
    for _ in 0..5 {
        if edited_of(&pushed).is_some() {
            break;
        }
        pushed = next_updates(&mut bob).await?;
    }
    let (caption, document) = edited_of(&pushed).context("the edit push has no document")?;
    assert_eq!(caption, "the data");
    let location = document_location(&document);
    assert_eq!(download(&mut bob, &location, 4096).await?, v2);
    Ok(())
}

/// The caption and document of the edited message an `Updates` carries.
fn edited_of(updates: &enums::Updates) -> Option<(String, types::Document)> {
    let enums::Updates::Updates(updates) = updates else {
        return None;
    };
    updates.updates.iter().find_map(|u| match u {
        enums::Update::EditMessage(edit) => match &edit.message {
            enums::Message::Message(m) => match &m.media {
                Some(enums::MessageMedia::Document(d)) => match &d.document {
                    Some(enums::Document::Document(d)) => Some((m.message.clone(), d.clone())),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        },
        _ => None,
    })
}

/// The sender of the first new message of an `Updates`.
fn document_owner(updates: &enums::Updates) -> Option<i64> {
    let enums::Updates::Updates(updates) = updates else {
        return None;
    };
    updates.updates.iter().find_map(|u| match u {
        enums::Update::NewMessage(new) => match &new.message {
            enums::Message::Message(types::Message {
                from_id: Some(enums::Peer::User(p)),
                ..
            }) => Some(p.user_id),
            _ => None,
        },
        _ => None,
    })
}

/// `messages.sendMultiMedia` of `items` (media, random_id, caption) to `peer`.
fn album(
    peer: &enums::InputPeer,
    items: Vec<(enums::InputMedia, i64, &str)>,
) -> functions::messages::SendMultiMedia {
    functions::messages::SendMultiMedia {
        silent: false,
        background: false,
        clear_draft: false,
        noforwards: false,
        update_stickersets_order: false,
        invert_media: false,
        allow_paid_floodskip: false,
        peer: peer.clone(),
        reply_to: None,
        multi_media: items
            .into_iter()
            .map(|(media, random_id, caption)| {
                enums::InputSingleMedia::Media(types::InputSingleMedia {
                    media,
                    random_id,
                    message: caption.into(),
                    entities: None,
                })
            })
            .collect(),
        schedule_date: None,
        send_as: None,
        quick_reply_shortcut: None,
        effect: None,
        allow_paid_stars: None,
    }
}

/// An uploaded file as a plain document's media.
fn uploaded_document(file: enums::InputFile, name: &str) -> enums::InputMedia {
    let peer = enums::InputPeer::PeerSelf;
    send_document(peer, file, "application/octet-stream", name, "", 0).media
}

/// An uploaded JPEG as a photo's media.
fn uploaded_photo(file: enums::InputFile) -> enums::InputMedia {
    enums::InputMedia::UploadedPhoto(types::InputMediaUploadedPhoto {
        spoiler: false,
        live_photo: false,
        file,
        stickers: None,
        ttl_seconds: None,
        video: None,
    })
}

fn jpeg(w: u32, h: u32) -> anyhow::Result<Vec<u8>> {
    let image = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x * 7 % 256) as u8, (y * 5 % 256) as u8, 90])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, image::ImageFormat::Jpeg)?;
    Ok(out.into_inner())
}

/// The new messages an `Updates` carries, with the random_id each updateMessageID gave.
fn new_messages(updates: &enums::Updates) -> (Vec<i64>, Vec<types::Message>) {
    let enums::Updates::Updates(updates) = updates else {
        return (Vec::new(), Vec::new());
    };
    let mut random_ids = Vec::new();
    let mut messages = Vec::new();
    for u in &updates.updates {
        match u {
            enums::Update::MessageId(m) => random_ids.push(m.random_id),
            enums::Update::NewMessage(types::UpdateNewMessage {
                message: enums::Message::Message(m),
                ..
            }) => messages.push(m.clone()),
            _ => {}
        }
    }
    (random_ids, messages)
}

/// The messages `client` holds with `peer`, newest first.
async fn history_with(client: &mut Client, peer: i64) -> anyhow::Result<Vec<types::Message>> {
    let history = client
        .invoke(&latest(enums::InputPeer::User(types::InputPeerUser {
            user_id: peer,
            access_hash: 0,
        })))
        .await?;
    let enums::messages::Messages::Messages(history) = history else {
        anyhow::bail!("{history:?}");
    };
    Ok(history
        .messages
        .into_iter()
        .filter_map(|m| match m {
            enums::Message::Message(m) => Some(m),
            _ => None,
        })
        .collect())
}

/// A message's document as a file sent again by id, as clients re-send what they see.
fn document_by_id(document: &types::Document) -> enums::InputMedia {
    enums::InputMedia::Document(types::InputMediaDocument {
        spoiler: false,
        id: enums::InputDocument::Document(types::InputDocument {
            id: document.id,
            access_hash: document.access_hash,
            file_reference: document.file_reference.clone(),
        }),
        video_cover: None,
        video_timestamp: None,
        ttl_seconds: None,
        query: None,
    })
}

fn document_in(m: &types::Message) -> Option<types::Document> {
    match &m.media {
        Some(enums::MessageMedia::Document(d)) => match &d.document {
            Some(enums::Document::Document(d)) => Some(d.clone()),
            _ => None,
        },
        _ => None,
    }
}

#[tokio::test]
async fn mtproto_albums_missing_parts_and_files_by_id() -> anyhow::Result<()> {
    let (_system, key, port) = system_with_door().await?;
    let mut ann = connect(&key, port).await?;
    let mut bob = connect(&key, port).await?;
    let mut cat = connect(&key, port).await?;
    let ann_user = sign_up(&mut ann, "15550701", "Ann").await?;
    let bob_user = sign_up(&mut bob, "15550702", "Bob").await?;
    sign_up(&mut cat, "15550703", "Cat").await?;
    let to_bob = enums::InputPeer::User(types::InputPeerUser {
        user_id: bob_user.id,
        access_hash: 0,
    });
    // Each part is its own future on the heap, so this body's debug-build frame holds none of
    // their temporaries (as one body, the test outgrew the test thread's stack).
    let bytes = Box::pin(missing_parts(&mut ann, &to_bob)).await?;
    let his = Box::pin(an_album_of_three(&mut ann, &mut bob, &to_bob, ann_user.id)).await?;
    Box::pin(bad_albums(
        &mut ann,
        &mut bob,
        &to_bob,
        ann_user.id,
        his.len(),
    ))
    .await?;
    let users = (&mut ann, &mut bob, &mut cat);
    Box::pin(media_by_id(users, &to_bob, ann_user.id, &bytes)).await
}

/// A missing part is named by its number; once it is saved, the same send goes through.
async fn missing_parts(ann: &mut Client, to_bob: &enums::InputPeer) -> anyhow::Result<Vec<u8>> {
    let bytes: Vec<u8> = (0..4 * 4096u32).map(|i| (i * 13 % 251) as u8).collect();
    for (part, chunk) in bytes.chunks(4096).enumerate() {
        if part != 2 {
            let saved = ann
                .invoke(&functions::upload::SaveFilePart {
                    file_id: 80,
                    file_part: part as i32,
                    bytes: chunk.to_vec(),
                })
                .await?;
            anyhow::ensure!(saved, "part {part}");
        }
    }
    let four = enums::InputFile::File(types::InputFile {
        id: 80,
        parts: 4,
        name: "four.bin".into(),
        md5_checksum: String::new(),
    });
    let send = send_document(to_bob.clone(), four, "text/plain", "four.bin", "", 70);
    assert_eq!(
        rpc_refusal(ann.invoke(&send).await),
        Some((400, "FILE_PART_2_MISSING".to_owned()))
    );
    ann.invoke(&functions::upload::SaveFilePart {
        file_id: 80,
        file_part: 2,
        bytes: bytes[2 * 4096..3 * 4096].to_vec(),
    })
    .await?;
    let sent = ann.invoke(&send).await?;
    let sent_document = document_of(&sent).context("the resend has no document")?;
    assert_eq!(sent_document.size, bytes.len() as i64);
    // A big file's parts likewise (a refused completion keeps the parts saved); parts saved
    // beyond the count make the count wrong.
    let big_part = |file_part: i32| functions::upload::SaveBigFilePart {
        file_id: 81,
        file_part,
        file_total_parts: 3,
        bytes: vec![file_part as u8; 100],
    };
    let big = |parts| {
        let file = enums::InputFile::Big(types::InputFileBig {
            id: 81,
            parts,
            name: "big.bin".into(),
        });
        send_document(to_bob.clone(), file, "text/plain", "b", "", 71)
    };
    for part in [1, 2] {
        ann.invoke(&big_part(part)).await?;
    }
    let refused = rpc_refusal(ann.invoke(&big(3)).await);
    assert_eq!(refused, Some((400, "FILE_PART_0_MISSING".to_owned())));
    ann.invoke(&big_part(0)).await?;
    // parts -> the refusal
    for (parts, name) in [(4, "FILE_PART_3_MISSING"), (2, "FILE_PARTS_INVALID")] {
        let refused = rpc_refusal(ann.invoke(&big(parts)).await);
        assert_eq!(refused, Some((400, name.to_owned())), "{parts} parts");
    }
    Ok(bytes)
}

/// An album of three reaches Bob as three messages of one group, captions each their own;
/// answers Bob's history with Ann.
async fn an_album_of_three(
    ann: &mut Client,
    bob: &mut Client,
    to_bob: &enums::InputPeer,
    ann_id: i64,
) -> anyhow::Result<Vec<types::Message>> {
    let mut items = Vec::new();
    for (i, caption) in ["one", "two", "three"].into_iter().enumerate() {
        let content = vec![i as u8 + 1; 5000 + i];
        let file = upload(ann, 90 + i as i64, &content, 4096, "a.bin").await?;
        items.push((
            uploaded_document(file, &format!("{caption}.bin")),
            100 + i as i64,
            caption,
        ));
    }
    let sent = ann.invoke(&album(to_bob, items)).await?;
    let (random_ids, mine) = new_messages(&sent);
    assert_eq!(random_ids, [100, 101, 102]);
    let group = mine
        .first()
        .and_then(|m| m.grouped_id)
        .context("no grouped_id")?;
    assert!(mine.iter().all(|m| m.grouped_id == Some(group)), "{mine:?}");
    let captions: Vec<&str> = mine.iter().map(|m| m.message.as_str()).collect();
    assert_eq!(captions, ["one", "two", "three"]);
    // The push and Bob's history show one group of three (the four-part file came first).
    let mut pushed_groups = Vec::new();
    for _ in 0..10 {
        if pushed_groups.len() >= 3 {
            break;
        }
        let (_, pushed) = new_messages(&next_updates(bob).await?);
        pushed_groups.extend(pushed.iter().filter_map(|m| m.grouped_id));
    }
    assert_eq!(pushed_groups.len(), 3, "{pushed_groups:?}");
    assert!(pushed_groups.windows(2).all(|w| w[0] == w[1]));
    let his = history_with(bob, ann_id).await?;
    let grouped: Vec<&str> = his
        .iter()
        .filter(|m| m.grouped_id.is_some())
        .map(|m| m.message.as_str())
        .collect();
    assert_eq!(grouped, ["three", "two", "one"]);
    let his_group = his.first().and_then(|m| m.grouped_id);
    assert!(his.iter().take(3).all(|m| m.grouped_id == his_group));
    Ok(his)
}

/// One bad item refuses the whole album: nothing more is sent.
async fn bad_albums(
    ann: &mut Client,
    bob: &mut Client,
    to_bob: &enums::InputPeer,
    ann_id: i64,
    count_before: usize,
) -> anyhow::Result<()> {
    let good = |id: i64| {
        uploaded_document(
            enums::InputFile::File(types::InputFile {
                id: 80,
                parts: 4,
                name: format!("{id}"),
                md5_checksum: String::new(),
            }),
            "again.bin",
        )
    };
    let never_uploaded = uploaded_document(
        enums::InputFile::File(types::InputFile {
            id: 99,
            parts: 1,
            name: "none".into(),
            md5_checksum: String::new(),
        }),
        "none.bin",
    );
    let geo = enums::InputMedia::GeoPoint(types::InputMediaGeoPoint {
        geo_point: enums::InputGeoPoint::Empty,
    });
    let long = "x".repeat(1025);
    // Refused at the door, and (the last two) by the send itself after the first item.
    let bad_albums = [
        (
            vec![
                (good(1), 200, ""),
                (never_uploaded, 201, ""),
                (good(2), 202, ""),
            ],
            "FILE_PART_0_MISSING",
        ),
        (vec![(good(1), 210, ""), (geo, 211, "")], "MEDIA_INVALID"),
        (
            (0..11).map(|i| (good(1), 220 + i, "")).collect(),
            "MULTI_MEDIA_TOO_LONG",
        ),
        (vec![], "MEDIA_EMPTY"),
        (
            vec![(good(1), 230, ""), (good(2), 230, "")],
            "RANDOM_ID_DUPLICATE",
        ),
        (
            vec![(good(1), 240, ""), (good(2), 241, long.as_str())],
            "MEDIA_CAPTION_TOO_LONG",
        ),
    ];
    for (items, name) in bad_albums {
        let n = items.len();
        let refused = rpc_refusal(ann.invoke(&album(to_bob, items)).await);
        assert_eq!(refused, Some((400, name.to_owned())), "{n} items");
    }
    let count = history_with(bob, ann_id).await?.len();
    assert_eq!(count, count_before, "a refused album sent something");
    Ok(())
}

/// Uploaded as media first (as clients upload an album), then sent by id: a photo with its
/// sizes and a document with its name.
async fn media_by_id(
    (ann, bob, cat): (&mut Client, &mut Client, &mut Client),
    to_bob: &enums::InputPeer,
    ann_id: i64,
    bytes: &[u8],
) -> anyhow::Result<()> {
    let photo_file = upload(ann, 110, &jpeg(400, 300)?, 64 * 1024, "p.jpg").await?;
    let photo = ann
        .invoke(&functions::messages::UploadMedia {
            business_connection_id: None,
            peer: to_bob.clone(),
            media: uploaded_photo(photo_file),
        })
        .await?;
    let enums::MessageMedia::Photo(types::MessageMediaPhoto {
        photo: Some(enums::Photo::Photo(photo)),
        ..
    }) = photo
    else {
        anyhow::bail!("uploadMedia answered {photo:?}");
    };
    let doc_file = upload(ann, 111, b"notes\n", 4096, "notes.txt").await?;
    let doc = ann
        .invoke(&functions::messages::UploadMedia {
            business_connection_id: None,
            peer: to_bob.clone(),
            media: uploaded_document(doc_file, "notes.txt"),
        })
        .await?;
    let enums::MessageMedia::Document(types::MessageMediaDocument {
        document: Some(enums::Document::Document(doc)),
        ..
    }) = doc
    else {
        anyhow::bail!("uploadMedia answered {doc:?}");
    };
    let by_id_photo = enums::InputMedia::Photo(types::InputMediaPhoto {
        spoiler: false,
        live_photo: false,
        id: enums::InputPhoto::Photo(types::InputPhoto {
            id: photo.id,
            access_hash: photo.access_hash,
            file_reference: photo.file_reference.clone(),
        }),
        ttl_seconds: None,
        video: None,
    });
    let sent = ann
        .invoke(&album(
            to_bob,
            vec![
                (by_id_photo, 300, "a photo"),
                (document_by_id(&doc), 301, ""),
            ],
        ))
        .await?;
    let (_, mine) = new_messages(&sent);
    assert!(
        matches!(&mine[0].media, Some(enums::MessageMedia::Photo(types::MessageMediaPhoto {
            photo: Some(enums::Photo::Photo(p)), ..
        })) if !p.sizes.is_empty()),
        "{:?}",
        mine[0].media
    );
    let notes = document_in(&mine[1]).context("no document")?;
    assert!(notes.attributes.iter().any(|a| matches!(a,
        enums::DocumentAttribute::Filename(f) if f.file_name == "notes.txt")));
    // Media from uploadMedia is sent, not downloaded: its reference names no message.
    let refused = rpc_refusal(get_file(ann, &document_location(&doc), 0, 4096).await);
    assert_eq!(refused, Some((400, "LOCATION_INVALID".to_owned())));
    // A reference cut short names nothing; the id must be the reference's own file.
    let mut cut = doc.clone();
    cut.file_reference.truncate(1);
    let mut other_id = doc.clone();
    other_id.id += 1;
    for forged in [cut, other_id] {
        let send = send_by_id(to_bob, document_by_id(&forged), 302);
        let refused = rpc_refusal(ann.invoke(&send).await);
        assert_eq!(refused, Some((400, "MEDIA_INVALID".to_owned())));
    }
    // Another user presenting Ann's upload sends nothing: the file is not hers.
    let refused = rpc_refusal(
        cat.invoke(&send_by_id(to_bob, document_by_id(&doc), 303))
            .await,
    );
    assert_eq!(refused, Some((400, "FILE_ID_INVALID".to_owned())));

    // Bob sends Ann's file back by id, from the message he holds: Ann gets the same bytes.
    let his = history_with(bob, ann_id).await?;
    let received = his
        .iter()
        .find_map(|m| document_in(m).filter(|d| d.size == bytes.len() as i64))
        .context("Bob has not the four-part file")?;
    let to_ann = enums::InputPeer::User(types::InputPeerUser {
        user_id: ann_id,
        access_hash: 0,
    });
    let back = bob
        .invoke(&send_by_id(&to_ann, document_by_id(&received), 400))
        .await?;
    let resent = document_of(&back).context("the resend has no document")?;
    assert_eq!(
        (resent.size, resent.mime_type.as_str()),
        (bytes.len() as i64, "text/plain")
    );
    assert_eq!(
        download(bob, &document_location(&resent), 4096).await?,
        bytes
    );
    // Cat holds no such message: Bob's reference sends nothing of hers.
    let refused = rpc_refusal(
        cat.invoke(&send_by_id(&to_ann, document_by_id(&received), 401))
            .await,
    );
    assert_eq!(refused, Some((400, "MEDIA_INVALID".to_owned())));
    Ok(())
}

/// `messages.sendMedia` of a file by id.
fn send_by_id(
    peer: &enums::InputPeer,
    media: enums::InputMedia,
    random_id: i64,
) -> functions::messages::SendMedia {
    let file = enums::InputFile::File(types::InputFile {
        id: 0,
        parts: 1,
        name: String::new(),
        md5_checksum: String::new(),
    });
    functions::messages::SendMedia {
        media,
        ..send_document(peer.clone(), file, "", "", "", random_id)
    }
}

/// Well past a gateway instance's check of rebound keys (every second), far below its cache's
/// life.
const REBOUND_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Unix seconds from now, as `auth.bindTempAuthKey`'s `expires_at`.
fn unix_in(seconds: u64) -> anyhow::Result<i32> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    Ok(i32::try_from(now.as_secs() + seconds)?)
}

/// A new temporary key (an hour) on the door at `port`, once the door is open.
async fn temporary(key: &ServerKey, port: u16) -> anyhow::Result<Client> {
    let addr = format!("127.0.0.1:{port}");
    for _ in 0..50 {
        match Client::connect_temporary(&addr, key.public(), Options::default(), 3600).await {
            Ok(client) => return Ok(client),
            Err(ClientError::Io(_)) => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            Err(error) => return Err(error.into()),
        }
    }
    anyhow::bail!("MTProto door on {port} never opened")
}

/// The user a key's calls act as.
async fn acting_user(client: &mut Client) -> anyhow::Result<i64> {
    match me(client).await?.as_slice() {
        [enums::User::User(user)] => Ok(user.id),
        other => anyhow::bail!("users.getUsers answered {other:?}"),
    }
}

/// Whether a pushed Updates carries a message of text `text`.
fn carries_text(push: &[u8], text: &str) -> bool {
    use oxigram_tl::Deserializable;
    match enums::Updates::deserialize(&mut oxigram_tl::Cursor::from_slice(push)) {
        Ok(enums::Updates::UpdateShortMessage(short)) => short.message == text,
        Ok(enums::Updates::Updates(updates)) => updates.updates.iter().any(|u| {
            matches!(u, enums::Update::NewMessage(new)
                if matches!(&new.message, enums::Message::Message(m) if m.message == text))
        }),
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_temporary_key_replaces_its_permanent_keys_last_one_on_every_gateway()
-> anyhow::Result<()> {
    let (system, key, port) = system_with_door().await?;
    let other_port = free_port()?;
    let _other = system.start_extra_gateway_with_door(other_port).await?;
    let (here, there) = (
        format!("127.0.0.1:{port}"),
        format!("127.0.0.1:{other_port}"),
    );
    let mut permanent = connect(&key, port).await?;
    let pat = sign_up(&mut permanent, "15550910", "Pat").await?;
    let mut bob = connect(&key, port).await?;
    sign_up(&mut bob, "15550911", "Bob").await?;
    let to_pat = enums::InputPeer::User(types::InputPeerUser {
        user_id: pat.id,
        access_hash: 0,
    });
    let perm = permanent.auth_key().clone();

    // T1 bound on gateway A acts for Pat's permanent key (and gets her pushes from then on).
    let mut t1 = temporary(&key, port).await?;
    assert!(t1.bind_temp_key(&perm, unix_in(3600)?).await?);
    assert_eq!(acting_user(&mut t1).await?, pat.id);

    // T2 bound to the same permanent key on A replaces T1 there at once: Bob's message is
    // pushed to T2 and not to T1, T1's next call is the unknown key's -404, and so is T1 on a
    // new connection.
    let mut t2 = temporary(&key, port).await?;
    assert!(t2.bind_temp_key(&perm, unix_in(3600)?).await?);
    assert_eq!(acting_user(&mut t2).await?, pat.id);
    bob.invoke(&send_text(to_pat.clone(), "for the current key", 1))
        .await?;
    let push = tokio::time::timeout(std::time::Duration::from_secs(15), t2.next_push())
        .await
        .context("no push to T2 within 15 s")??;
    assert!(carries_text(&push, "for the current key"));
    let started = tokio::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(2) {
        let Ok(push) =
            tokio::time::timeout(std::time::Duration::from_millis(500), t1.next_push()).await
        else {
            continue;
        };
        assert!(!carries_text(&push?, "for the current key"), "T1 got it");
    }
    let replaced = me(&mut t1).await;
    assert!(
        matches!(replaced, Err(ClientError::Transport(-404))),
        "{replaced:?}"
    );
    let mut t1_again = Client::reconnect(&here, t1.auth_key().clone(), Options::default()).await?;
    let reconnected = me(&mut t1_again).await;
    assert!(
        matches!(reconnected, Err(ClientError::Transport(-404))),
        "{reconnected:?}"
    );

    // T2 is used on gateway B too, for longer than B looks back over rebound keys (its own
    // binding among them), so that B holds what T2 acts as in its cache.
    let mut t2_there = Client::reconnect(&there, t2.auth_key().clone(), Options::default()).await?;
    for _ in 0..10 {
        assert_eq!(acting_user(&mut t2_there).await?, pat.id);
        tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    }

    // T3 bound on A: T2 ends at once on A, and on B within the bound of B's cache.
    let mut t3 = temporary(&key, port).await?;
    assert!(t3.bind_temp_key(&perm, unix_in(3600)?).await?);
    let on_a = me(&mut t2).await;
    assert!(
        matches!(on_a, Err(ClientError::Transport(-404))),
        "{on_a:?}"
    );
    let started = tokio::time::Instant::now();
    loop {
        match me(&mut t2_there).await {
            Ok(_) => anyhow::ensure!(
                started.elapsed() < REBOUND_WITHIN,
                "T2 still acts for Pat on B after {REBOUND_WITHIN:?}"
            ),
            Err(ClientError::Transport(-404)) => break,
            Err(other) => anyhow::bail!("T2 on B: {other:?}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    eprintln!(
        "a replaced temporary key ended on the other gateway after {:?}",
        started.elapsed()
    );

    // T3 acts for Pat on both gateways, and the permanent key is untouched.
    assert_eq!(acting_user(&mut t3).await?, pat.id);
    let mut t3_there = Client::reconnect(&there, t3.auth_key().clone(), Options::default()).await?;
    assert_eq!(acting_user(&mut t3_there).await?, pat.id);
    assert_eq!(acting_user(&mut permanent).await?, pat.id);
    Ok(())
}

#[tokio::test]
async fn stock_telethon_protocol_habits_get_no_bad_msg_notification() -> anyhow::Result<()> {
    let (_system, key, port) = system_with_door().await?;
    let seen = run_telethon(&key, port, "protocol.py", &["+15550920", LOGIN_CODE]).await?;
    // Telethon corrects and re-sends a refused message by itself: none may be refused (its
    // seq_no order, containers, acks, the same session on a new connection, a new session).
    assert_eq!(seen["bad_msgs"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["ignored"], 0, "{seen}");
    // It did what the scenario is about.
    let count = |name: &str| seen[name].as_u64().unwrap_or_default();
    assert!(count("containers") > 0, "{seen}");
    assert!(count("acks") > 0, "{seen}");
    assert!(count("gzipped") > 0, "{seen}");
    assert_eq!(seen["same_session"], true, "{seen}");
    assert_eq!(seen["new_session"], true, "{seen}");
    assert!(count("reconnects") > 0, "{seen}");
    // And every call was answered as its own.
    for label in ["first", "resumed", "reconnected"] {
        let texts: Vec<String> = (0..5).map(|i| format!("{label} {i}")).collect();
        assert_eq!(seen[label], serde_json::json!(texts), "{seen}");
    }
    assert_eq!(seen["me_resolved"], true, "{seen}");
    assert_eq!(seen["long_text_kept"], true, "{seen}");
    assert_eq!(
        seen["chained"],
        serde_json::json!(["chained 0", "chained 1", "chained 2"])
    );
    Ok(())
}
