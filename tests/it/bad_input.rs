//! Bad input is the client's fault and says so with a stable code: a request body that is not
//! a well-formed message (or not a well-formed gRPC frame) answers `INVALID_ARGUMENT` with
//! `INPUT_REQUEST_INVALID` on every method of the client API, and a text holding NUL answers
//! `INPUT_TEXT_INVALID` in every text field, before anything is written.

use std::collections::{BTreeSet, HashMap};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use oxigram_proto::{
    api::v1::{
        CompleteUploadRequest, CreateAuthKeyRequest, EditMessageRequest, ResolvePhoneRequest,
        SaveFilePartRequest, SearchRequest, SendCodeRequest, SendMessageRequest, SignInRequest,
        SignUpRequest, auth_client::AuthClient, media_client::MediaClient,
    },
    types::v1::{
        DialogFilter, MessageEntity, SaveDraftRequest, UpdateDialogFilterRequest, message_entity,
    },
};
use oxigram_tests::{LOGIN_CODE, Mode, System, client::code};
use prost::Message;
use prost_types::{DescriptorProto, FileDescriptorSet, field_descriptor_proto::Type as FieldType};
use sqlx::Row;
use tonic::{Code, Status, transport::Channel};
use tower::ServiceExt;

/// One method of the client API: its path and its request message.
struct Method {
    path: String,
    input: DescriptorProto,
}

/// Every method of every service of the client API, read from the served descriptors, so a
/// method added later is covered without touching this file.
fn client_methods() -> anyhow::Result<Vec<Method>> {
    let set = FileDescriptorSet::decode(oxigram_proto::FILE_DESCRIPTOR_SET)?;
    let mut messages: HashMap<String, DescriptorProto> = HashMap::new();
    for file in &set.file {
        for message in &file.message_type {
            messages.insert(
                format!(".{}.{}", file.package(), message.name()),
                message.clone(),
            );
        }
    }
    let mut methods = Vec::new();
    for file in set.file.iter().filter(|f| f.package() == "oxigram.api.v1") {
        for service in &file.service {
            for method in &service.method {
                let input = messages
                    .get(method.input_type())
                    .with_context(|| format!("no message {}", method.input_type()))?;
                methods.push(Method {
                    path: format!("/{}.{}/{}", file.package(), service.name(), method.name()),
                    input: input.clone(),
                });
            }
        }
    }
    Ok(methods)
}

fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn key(field: i32, wire_type: u8) -> Vec<u8> {
    let mut out = Vec::new();
    varint(((field as u64) << 3) | u64::from(wire_type), &mut out);
    out
}

/// The malformed messages for one request type: those that break any message, plus a wrong
/// wire type for its first field and invalid UTF-8 in its first string field, when it has
/// them.
fn malformed_messages(input: &DescriptorProto) -> Vec<(String, Vec<u8>)> {
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        (
            "bad varint (eleven bytes)".into(),
            vec![
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
        ),
        (
            "truncated length-delimited field".into(),
            vec![0x0a, 0x05, b'h', b'i'],
        ),
        ("field number 0".into(), vec![0x02, 0x00]),
        (
            "random bytes".into(),
            vec![0x9c, 0x3e, 0x71, 0xd4, 0x0f, 0xa8, 0x56, 0xe2, 0x1b, 0xc7],
        ),
    ];
    if let Some(field) = input.field.first() {
        // A 32-bit value where the field is a varint or length-delimited one (and a varint
        // where it is a 32-bit one): no encoding of the field accepts it, packed or not.
        let thirty_two_bit = matches!(
            field.r#type(),
            FieldType::Fixed32 | FieldType::Sfixed32 | FieldType::Float
        );
        let mut body = if thirty_two_bit {
            key(field.number(), 0)
        } else {
            key(field.number(), 5)
        };
        body.extend_from_slice(if thirty_two_bit {
            &[0x01]
        } else {
            &[1, 0, 0, 0]
        });
        cases.push((format!("wrong wire type for {}", field.name()), body));
    }
    if let Some(field) = input.field.iter().find(|f| f.r#type() == FieldType::String) {
        let mut body = key(field.number(), 2);
        body.extend_from_slice(&[0x02, 0xc3, 0x28]);
        cases.push((format!("invalid UTF-8 in {}", field.name()), body));
    }
    cases
}

/// One gRPC frame: compression flag, big-endian length, message.
fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Request bodies that tonic refuses before any message is decoded.
fn malformed_frames() -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "compressed flag without grpc-encoding".into(),
            vec![1, 0, 0, 0, 0],
        ),
        ("invalid compression flag".into(), vec![2, 0, 0, 0, 0]),
        (
            "length prefix longer than the body".into(),
            vec![0, 0, 0, 0, 10, 0x08, 0x01],
        ),
        ("truncated frame header".into(), vec![0, 0, 0]),
        ("no message at all".into(), Vec::new()),
    ]
}

/// Posts `body` as it is to `path` and returns the call's status (`Ok` when it succeeded).
async fn post(channel: &Channel, path: &str, body: Vec<u8>) -> anyhow::Result<Status> {
    let request = http::Request::builder()
        .method(http::Method::POST)
        .uri(path)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(tonic::body::Body::new(Full::new(Bytes::from(body))))?;
    let response = channel.clone().oneshot(request).await?;
    // A refusal is trailers-only; a call that ran has its status in the trailers.
    if let Some(status) = Status::from_header_map(response.headers()) {
        return Ok(status);
    }
    let collected = response.into_body().collect().await?;
    let trailers = collected.trailers().context("an answer without trailers")?;
    Status::from_header_map(trailers).context("trailers without grpc-status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_are_invalid_arguments_on_every_method() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let channel = tonic::transport::Endpoint::from_shared(system.gateway())?
        .connect()
        .await?;
    let methods = client_methods()?;
    let services: BTreeSet<&str> = methods
        .iter()
        .filter_map(|m| m.path.split('/').nth(1))
        .collect();
    assert_eq!(
        services,
        BTreeSet::from([
            "oxigram.api.v1.Account",
            "oxigram.api.v1.Auth",
            "oxigram.api.v1.Contacts",
            "oxigram.api.v1.Dialogs",
            "oxigram.api.v1.Media",
            "oxigram.api.v1.Messages",
            "oxigram.api.v1.Updates",
            "oxigram.api.v1.Users",
        ])
    );
    assert!(methods.len() >= 27, "only {} methods", methods.len());

    let mut failures = Vec::new();
    let mut checked = 0;
    for method in &methods {
        // The control: a well-formed (empty) message reaches the handler, which answers
        // anything but INPUT_REQUEST_INVALID (no auth key: AUTH_KEY_INVALID, mostly).
        let control = post(&channel, &method.path, frame(&[])).await?;
        if code(&control).as_deref() == Some("INPUT_REQUEST_INVALID") {
            failures.push(format!(
                "{} (well-formed control): {control:?}",
                method.path
            ));
        }
        let bodies = malformed_messages(&method.input)
            .into_iter()
            .map(|(case, message)| (case, frame(&message)))
            .chain(malformed_frames());
        for (case, body) in bodies {
            let status = post(&channel, &method.path, body).await?;
            checked += 1;
            if status.code() != Code::InvalidArgument
                || code(&status).as_deref() != Some("INPUT_REQUEST_INVALID")
            {
                failures.push(format!(
                    "{} ({case}): {:?} {:?} {:?}",
                    method.path,
                    status.code(),
                    code(&status),
                    status.message()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} malformed requests were not INVALID_ARGUMENT + INPUT_REQUEST_INVALID:\n{}",
        failures.len(),
        failures.join("\n")
    );
    Ok(())
}

fn expect_nul_refused<T: std::fmt::Debug>(field: &str, result: Result<T, Status>) {
    match result {
        Ok(v) => panic!("{field} with NUL was accepted: {v:?}"),
        Err(status) => {
            assert_eq!(status.code(), Code::InvalidArgument, "{field}: {status:?}");
            assert_eq!(
                code(&status).as_deref(),
                Some("INPUT_TEXT_INVALID"),
                "{field}: {status:?}"
            );
        }
    }
}

async fn count(system: &System, table: &str) -> anyhow::Result<i64> {
    Ok(sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) AS n FROM {table}"
    )))
    .fetch_one(&mut system.db().await?)
    .await?
    .try_get("n")?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_with_nul_is_refused_in_every_text_field() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let channel = tonic::transport::Endpoint::from_shared(system.gateway())?
        .connect()
        .await?;

    let keys = count(&system, "gateway.auth_keys").await?;
    expect_nul_refused(
        "device_model",
        AuthClient::new(channel.clone())
            .create_auth_key(CreateAuthKeyRequest {
                device_model: "phone\0".into(),
            })
            .await,
    );
    assert_eq!(count(&system, "gateway.auth_keys").await?, keys);

    let mut alice = system.device().await?;
    let phone = "15557001";
    expect_nul_refused(
        "phone",
        alice
            .auth()
            .send_code(SendCodeRequest {
                phone: "1555\u{0}7001".into(),
            })
            .await,
    );
    let hash = alice
        .auth()
        .send_code(SendCodeRequest {
            phone: phone.into(),
        })
        .await?
        .into_inner()
        .phone_code_hash;
    let sign_up = |first_name: &str, hash: &str, code: &str| SignUpRequest {
        phone: phone.into(),
        phone_code_hash: hash.into(),
        code: code.into(),
        first_name: first_name.into(),
    };
    expect_nul_refused(
        "first_name",
        alice
            .auth()
            .sign_up(sign_up("Al\0ice", &hash, LOGIN_CODE))
            .await,
    );
    expect_nul_refused(
        "phone_code_hash",
        alice
            .auth()
            .sign_up(sign_up("Alice", &format!("{hash}\0"), LOGIN_CODE))
            .await,
    );
    expect_nul_refused(
        "code",
        alice.auth().sign_up(sign_up("Alice", &hash, "123\0")).await,
    );
    expect_nul_refused(
        "sign-in code",
        alice
            .auth()
            .sign_in(SignInRequest {
                phone: phone.into(),
                phone_code_hash: hash.clone(),
                code: "\0".into(),
            })
            .await,
    );
    assert_eq!(
        count(&system, "gateway.users").await?,
        0,
        "no account was made"
    );
    // The refusals used nothing up: the same code still signs Alice up.
    let user = alice
        .auth()
        .sign_up(sign_up("Alice", &hash, LOGIN_CODE))
        .await?
        .into_inner()
        .user
        .context("no user")?;
    alice.user = Some(user);
    expect_nul_refused(
        "resolved phone",
        alice
            .users()
            .resolve_phone(ResolvePhoneRequest {
                phone: "\u{0}15557001".into(),
            })
            .await,
    );
    let username = |name: &str| oxigram_proto::api::v1::UpdateUsernameRequest {
        username: name.into(),
    };
    expect_nul_refused(
        "username",
        alice.users().update_username(username("alice\0")).await,
    );
    expect_nul_refused(
        "checked username",
        alice.users().check_username(username("alice\0")).await,
    );
    expect_nul_refused(
        "resolved username",
        alice
            .users()
            .resolve_username(oxigram_proto::api::v1::ResolveUsernameRequest {
                username: "alice\0".into(),
            })
            .await,
    );
    for (field, request) in [
        (
            "profile first_name",
            oxigram_proto::api::v1::UpdateProfileRequest {
                first_name: Some("Al\0".into()),
                ..Default::default()
            },
        ),
        (
            "last_name",
            oxigram_proto::api::v1::UpdateProfileRequest {
                last_name: Some("Sm\0".into()),
                ..Default::default()
            },
        ),
        (
            "about",
            oxigram_proto::api::v1::UpdateProfileRequest {
                about: Some("hi\0".into()),
                ..Default::default()
            },
        ),
    ] {
        expect_nul_refused(field, alice.users().update_profile(request).await);
    }
    for (field, contact) in [
        ("contact phone", ("1555\u{0}7002", "Bob", "")),
        ("contact first_name", ("15557002", "B\0b", "")),
        ("contact last_name", ("15557002", "Bob", "\0")),
    ] {
        let imported = alice
            .import_contacts(&[contact])
            .await
            .map_err(Status::from);
        expect_nul_refused(field, imported);
    }

    let mut bob = system.device().await?;
    bob.sign_up("15557002", "Bob").await?;
    let bob_id = bob.user_id()?;
    expect_nul_refused("text", alice.send(bob_id, 1, "hello\0Bob").await);
    expect_nul_refused(
        "reaction",
        alice
            .send_reaction(oxigram_proto::types::v1::InputPeer::user(bob_id), 1, "👍\0")
            .await
            .map_err(Status::from),
    );
    expect_nul_refused(
        "search query",
        alice
            .messages()
            .search(SearchRequest {
                q: "hello\0Bob".into(),
                ..Default::default()
            })
            .await,
    );
    assert!(
        alice.history(bob_id).await?.is_empty(),
        "the history stays empty"
    );
    assert!(bob.history(alice.user_id()?).await?.is_empty());
    assert_eq!(count(&system, "messages.message_bodies").await?, 0);
    let hello = alice.send(bob_id, 2, "hello Bob").await?;
    let hello_id = hello.message.context("no message")?.id;
    expect_nul_refused("edited text", alice.edit(bob_id, hello_id, "hi\0Bob").await);
    let draft = |text: &str, entities: Vec<MessageEntity>| SaveDraftRequest {
        peer: Some(oxigram_proto::types::v1::InputPeer::user(bob_id)),
        text: text.into(),
        entities,
        reply_to_msg_id: 0,
    };
    let nul_link = MessageEntity {
        kind: message_entity::Kind::TextUrl as i32,
        offset: 0,
        length: 5,
        url: "https://example.com/\0".into(),
        ..Default::default()
    };
    expect_nul_refused(
        "draft text",
        alice.dialogs().save_draft(draft("half\0", vec![])).await,
    );
    expect_nul_refused(
        "draft entity url",
        alice
            .dialogs()
            .save_draft(draft("hello", vec![nul_link]))
            .await,
    );
    let filter = |title: &str, emoticon: &str| UpdateDialogFilterRequest {
        id: 2,
        filter: Some(DialogFilter {
            id: 2,
            title: title.into(),
            emoticon: emoticon.into(),
            non_contacts: true,
            ..Default::default()
        }),
    };
    expect_nul_refused(
        "filter title",
        alice
            .dialogs()
            .update_dialog_filter(filter("Wo\0rk", ""))
            .await,
    );
    expect_nul_refused(
        "filter emoticon",
        alice
            .dialogs()
            .update_dialog_filter(filter("Work", "\0"))
            .await,
    );
    assert!(
        alice.get_dialog_filters().await?.is_empty(),
        "no filter was made"
    );
    let formatted = |change: fn(&mut SendMessageRequest)| {
        let mut request = SendMessageRequest {
            peer: Some(oxigram_proto::types::v1::InputPeer::user(bob_id)),
            random_id: 3,
            text: "hello Bob".into(),
            reply_to_msg_id: hello_id,
            ..Default::default()
        };
        change(&mut request);
        request
    };
    let link = MessageEntity {
        kind: message_entity::Kind::TextUrl as i32,
        offset: 0,
        length: 5,
        url: "https://example.com/\0".into(),
        ..Default::default()
    };
    let code_block = MessageEntity {
        kind: message_entity::Kind::Pre as i32,
        offset: 0,
        length: 5,
        language: "rust\0".into(),
        ..Default::default()
    };
    for (field, request) in [
        ("quote_text", formatted(|r| r.quote_text = "hello\0".into())),
        (
            "entity url",
            SendMessageRequest {
                entities: vec![link.clone()],
                ..formatted(|_| {})
            },
        ),
        (
            "entity language",
            SendMessageRequest {
                entities: vec![code_block.clone()],
                ..formatted(|_| {})
            },
        ),
        (
            "quote entity url",
            SendMessageRequest {
                quote_text: "hello".into(),
                quote_entities: vec![link.clone()],
                ..formatted(|_| {})
            },
        ),
    ] {
        expect_nul_refused(field, alice.messages().send_message(request).await);
    }
    expect_nul_refused(
        "edited entity url",
        alice
            .messages()
            .edit_message(EditMessageRequest {
                peer: Some(oxigram_proto::types::v1::InputPeer::user(bob_id)),
                id: hello_id,
                text: "hello Bob!".into(),
                entities: vec![link],
                ..Default::default()
            })
            .await,
    );
    let history = alice.history(bob_id).await?;
    assert_eq!(
        history
            .iter()
            .map(|m| (m.text.as_str(), m.edit_date))
            .collect::<Vec<_>>(),
        [("hello Bob", 0)],
        "the message is as sent"
    );

    let mut media = MediaClient::new(alice.channel());
    media
        .save_file_part(SaveFilePartRequest {
            file_id: 1,
            part: 0,
            bytes: b"content".to_vec().into(),
        })
        .await?;
    let complete = |name: &str| CompleteUploadRequest {
        file_id: 1,
        parts: 1,
        name: name.into(),
    };
    expect_nul_refused("name", media.complete_upload(complete("a\0.txt")).await);
    assert_eq!(count(&system, "media.file_refs").await?, 0);
    // The parts are still there for a good name.
    let file = media.complete_upload(complete("a.txt")).await?.into_inner();
    assert_eq!(file.name, "a.txt");
    Ok(())
}
