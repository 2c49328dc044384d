//! The MTProto front door against the whole system: the crate's own Rust client and the stock
//! Telethon 1.45 (installed into a cached venv by `scripts/install-telethon.sh`) create auth
//! keys, sign up and call the API; an MTProto key is an auth key of the gateway's accounts,
//! seen by the gRPC door's authorizations and ended by either door's logout.

use std::process::Command;

use anyhow::Context;
use oxigram_mtproto::ServerKey;
use oxigram_mtproto::client::{Client, ClientError, Options};
use oxigram_proto::api::v1::GetAuthorizationsRequest;
use oxigram_tests::{LOGIN_CODE, Mode, System, free_port};
use oxigram_tl::{enums, functions, types};

/// A system with the door open on a free port; the server key's public PEM is returned.
async fn system_with_door() -> anyhow::Result<(System, ServerKey, u16)> {
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

async fn connect(key: &ServerKey, port: u16) -> anyhow::Result<Client> {
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

async fn sign_up(client: &mut Client, phone: &str) -> anyhow::Result<types::User> {
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
    let signed_in = client
        .invoke(&functions::auth::SignIn {
            phone_number: phone.into(),
            phone_code_hash: sent.phone_code_hash.clone(),
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
            phone_code_hash: sent.phone_code_hash,
            first_name: "Rust".into(),
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

/// The latest ten messages with `peer`.
fn latest(peer: enums::InputPeer) -> functions::messages::GetHistory {
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
    let user = sign_up(&mut client, "15550100").await?;
    assert!(user.is_self);
    assert_eq!(user.first_name.as_deref(), Some("Rust"));
    let users = me(&mut client).await?;
    assert!(matches!(users.as_slice(), [enums::User::User(u)] if u.id == user.id));

    // A message to her Saved Messages, answered as Telegram does, and read back.
    let sent = client
        .invoke(&functions::messages::SendMessage {
            no_webpage: false,
            silent: false,
            background: false,
            clear_draft: false,
            noforwards: false,
            update_stickersets_order: false,
            invert_media: false,
            allow_paid_floodskip: false,
            peer: enums::InputPeer::PeerSelf,
            reply_to: None,
            message: "hello over MTProto".into(),
            random_id: 77,
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
        })
        .await?;
    let enums::Updates::UpdateShortSentMessage(sent) = sent else {
        anyhow::bail!("send answered {sent:?}");
    };
    assert!(sent.out);
    assert_eq!((sent.pts, sent.pts_count), (1, 1));
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
    let listed = format!("{keys:?}");
    assert!(
        listed.contains(&client.auth_key().id().to_string()),
        "{listed}"
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

#[tokio::test]
async fn stock_telethon_signs_up_and_reads_itself() -> anyhow::Result<()> {
    let (_system, key, port) = system_with_door().await?;
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
    let python = String::from_utf8(install.stdout)?.trim().to_owned();
    let pem = std::env::temp_dir().join(oxigram_tests::unique_name("mtproto-pub"));
    std::fs::write(&pem, key.public_pem()?)?;
    let run = tokio::process::Command::new(&python)
        .arg(root.join("tests/telethon/sign_up.py"))
        .arg(&pem)
        .arg(port.to_string())
        .arg("+15550200")
        .arg(LOGIN_CODE)
        .output();
    let run = tokio::time::timeout(std::time::Duration::from_secs(120), run)
        .await
        .context("Telethon timed out")??;
    let _ = std::fs::remove_file(&pem);
    let stdout = String::from_utf8_lossy(&run.stdout);
    anyhow::ensure!(
        run.status.success(),
        "Telethon failed: {stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let seen: serde_json::Value = serde_json::from_str(stdout.trim())?;
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
