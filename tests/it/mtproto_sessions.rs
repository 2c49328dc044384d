//! Sessions across the two front doors: an MTProto key is an auth key of the gateway's own
//! accounts, so a device on either door ends the other door's devices, one by its key id or
//! every other one at once. An MTProto session so ended answers its next call 401
//! `AUTH_KEY_UNREGISTERED`, as Telegram does, and gets no more pushes; a gRPC device so ended
//! is refused with the gateway's `AUTH_KEY_UNREGISTERED` and its stream ends.

use std::time::Duration;

use anyhow::Context;

use oxigram_mtproto::client::{Client, ClientError};
use oxigram_proto::api::v1::{
    GetAuthorizationsRequest, ResetAuthorizationRequest, ResetAuthorizationsRequest,
};
use oxigram_proto::types::v1::update;
use oxigram_tests::TestClient;
use oxigram_tests::client::{code, next_update_where};
use oxigram_tests::mtproto::{sign_in, sign_up};
use oxigram_tl::{Cursor, Deserializable, enums, functions};

use crate::mtproto::{connect, system_with_door};

/// How long a push that would come is waited for before it counts as not pushed: far longer
/// than a push takes once the same user's gRPC device has the message.
const NO_PUSH_WITHIN: Duration = Duration::from_secs(2);

/// The texts of the new messages an `Updates` carries.
fn texts(updates: &enums::Updates) -> Vec<String> {
    match updates {
        enums::Updates::UpdateShortMessage(m) => vec![m.message.clone()],
        enums::Updates::Updates(u) => u
            .updates
            .iter()
            .filter_map(|u| match u {
                enums::Update::NewMessage(n) => match &n.message {
                    enums::Message::Message(m) => Some(m.message.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether `client` is pushed a new message with `text` within `within` (other pushes, such as
/// presence, are passed over).
async fn pushed(client: &mut Client, text: &str, within: Duration) -> anyhow::Result<bool> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let Ok(push) = tokio::time::timeout_at(deadline, client.next_push()).await else {
            return Ok(false);
        };
        let updates = enums::Updates::deserialize(&mut Cursor::from_slice(&push?))?;
        if texts(&updates).iter().any(|t| t == text) {
            return Ok(true);
        }
    }
}

/// The refusal of an MTProto call, as (number, name).
fn refusal<T: std::fmt::Debug>(result: Result<T, ClientError>) -> anyhow::Result<(i32, String)> {
    match result {
        Err(ClientError::Rpc(e)) => Ok((e.code, e.message)),
        other => anyhow::bail!("expected an rpc_error, got {other:?}"),
    }
}

/// The refusal of an MTProto session whose key was signed out, on its next call.
async fn next_call_refusal(client: &mut Client) -> anyhow::Result<(i32, String)> {
    refusal(client.invoke(&functions::updates::GetState {}).await)
}

/// `user`'s gRPC device gets a new message with `text` on its stream.
async fn stream_gets(
    stream: &mut tonic::Streaming<oxigram_proto::api::v1::StreamEvent>,
    text: &str,
) -> anyhow::Result<()> {
    let got = next_update_where(stream, |kind| match kind {
        update::Kind::NewMessage(n) => n.message.filter(|m| m.text == text),
        _ => None,
    })
    .await?;
    assert_eq!(got.text, text);
    Ok(())
}

/// The gateway's code of a gRPC device's call after its key was signed out.
async fn grpc_refusal(device: &TestClient) -> Option<String> {
    match device.difference(0).await {
        Ok(_) => None,
        Err(status) => code(&status),
    }
}

/// A gRPC device's stream ends (or fails) within 3 s: at once, as the reset ends it on the
/// gateway that made it, not at the gateways' periodic check of the streams' keys (every
/// `route_ttl_secs / 3`, 10 s in the harness).
async fn stream_ends(
    stream: &mut tonic::Streaming<oxigram_proto::api::v1::StreamEvent>,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let next = tokio::time::timeout_at(deadline, stream.message())
            .await
            .context("the ended device's stream goes on")?;
        match next {
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => return Ok(()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_device_ends_mtproto_sessions_by_key_and_all_others_at_once() -> anyhow::Result<()> {
    let (system, key, port) = system_with_door().await?;
    let [sam] = system.users([("15550901", "Sam")]).await?;
    let mut nina = system.device().await?;
    let nina_id = nina.sign_up("15550902", "Nina").await?.id;
    let mut nina_stream = nina.stream(0).await?;
    // Two MTProto sessions of Nina's; signing in is a call, so each gets live updates from it.
    let mut door_one = connect(&key, port).await?;
    let mut door_two = connect(&key, port).await?;
    assert_eq!(sign_in(&mut door_one, "15550902").await?.id, nina_id);
    assert_eq!(sign_in(&mut door_two, "15550902").await?.id, nina_id);

    sam.send(nina_id, 1, "before any reset").await?;
    stream_gets(&mut nina_stream, "before any reset").await?;
    for door in [&mut door_one, &mut door_two] {
        assert!(pushed(door, "before any reset", Duration::from_secs(15)).await?);
    }

    // The gRPC device lists both MTProto keys and ends the first by its id.
    let listed: Vec<i64> = nina
        .auth()
        .get_authorizations(GetAuthorizationsRequest {})
        .await?
        .into_inner()
        .authorizations
        .iter()
        .map(|a| a.auth_key_id)
        .collect();
    let (one, two) = (door_one.auth_key().id(), door_two.auth_key().id());
    let mut expected = vec![nina.auth_key_id, one, two];
    expected.sort_unstable();
    assert_eq!(listed, expected);
    nina.auth()
        .reset_authorization(ResetAuthorizationRequest { auth_key_id: one })
        .await?;

    sam.send(nina_id, 2, "after one reset").await?;
    stream_gets(&mut nina_stream, "after one reset").await?;
    assert!(pushed(&mut door_two, "after one reset", Duration::from_secs(15)).await?);
    assert!(
        !pushed(&mut door_one, "after one reset", NO_PUSH_WITHIN).await?,
        "the ended session still gets pushes"
    );
    assert_eq!(
        next_call_refusal(&mut door_one).await?,
        (401, "AUTH_KEY_UNREGISTERED".to_owned())
    );
    // Its connection stays usable: it may sign in again (here, not).
    let enums::NearestDc::Dc(dc) = door_one.invoke(&functions::help::GetNearestDc {}).await?;
    assert_eq!(dc.this_dc, 1);

    // Every other device at once: only the second session is left to end.
    let ended = nina
        .auth()
        .reset_authorizations(ResetAuthorizationsRequest {})
        .await?
        .into_inner();
    assert_eq!(ended.signed_out, 1);
    sam.send(nina_id, 3, "after all others").await?;
    stream_gets(&mut nina_stream, "after all others").await?;
    assert!(
        !pushed(&mut door_two, "after all others", NO_PUSH_WITHIN).await?,
        "a session ended with every other one still gets pushes"
    );
    assert_eq!(
        next_call_refusal(&mut door_two).await?,
        (401, "AUTH_KEY_UNREGISTERED".to_owned())
    );
    // The device that reset them stays, alone.
    let left = nina
        .auth()
        .get_authorizations(GetAuthorizationsRequest {})
        .await?
        .into_inner()
        .authorizations;
    assert_eq!(
        left.iter()
            .map(|a| (a.auth_key_id, a.current))
            .collect::<Vec<_>>(),
        vec![(nina.auth_key_id, true)]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mtproto_session_ends_grpc_devices_by_key_and_all_others_at_once() -> anyhow::Result<()>
{
    let (system, key, port) = system_with_door().await?;
    let mut door = connect(&key, port).await?;
    let dora = sign_up(&mut door, "15551001", "Dora").await?;
    let mut phone = system.device().await?;
    let mut laptop = system.device().await?;
    assert_eq!(phone.sign_in("15551001").await?.id, dora.id);
    assert_eq!(laptop.sign_in("15551001").await?.id, dora.id);
    let mut phone_stream = phone.stream(0).await?;
    let mut laptop_stream = laptop.stream(0).await?;
    let mut other_door = connect(&key, port).await?;
    assert_eq!(sign_in(&mut other_door, "15551001").await?.id, dora.id);

    // The door lists every device of hers by its key id, itself the current one.
    let enums::account::Authorizations::Authorizations(listed) = door
        .invoke(&functions::account::GetAuthorizations {})
        .await?;
    let mut hashes: Vec<(i64, bool)> = listed
        .authorizations
        .iter()
        .map(|a| match a {
            enums::Authorization::Authorization(a) => (a.hash, a.current),
        })
        .collect();
    hashes.sort_unstable();
    let mut expected = vec![
        (door.auth_key().id(), true),
        (other_door.auth_key().id(), false),
        (phone.auth_key_id, false),
        (laptop.auth_key_id, false),
    ];
    expected.sort_unstable();
    assert_eq!(hashes, expected);

    // account.resetAuthorization by the phone's key id: the phone is refused and its stream
    // ends; the laptop goes on.
    let reset = door
        .invoke(&functions::account::ResetAuthorization {
            hash: phone.auth_key_id,
        })
        .await?;
    assert!(reset);
    stream_ends(&mut phone_stream).await?;
    assert_eq!(
        grpc_refusal(&phone).await.as_deref(),
        Some("AUTH_KEY_UNREGISTERED")
    );
    assert_eq!(grpc_refusal(&laptop).await, None);

    // Resets Telegram refuses too: the calling session itself, a key already ended, a key that
    // names no device of hers.
    let refused: [(i64, (i32, &str)); 3] = [
        (door.auth_key().id(), (400, "HASH_INVALID")),
        (phone.auth_key_id, (400, "HASH_INVALID")),
        (424_242, (400, "HASH_INVALID")),
    ];
    for (hash, (number, name)) in refused {
        let answer = door
            .invoke(&functions::account::ResetAuthorization { hash })
            .await;
        assert_eq!(refusal(answer)?, (number, name.to_owned()), "hash {hash}");
    }

    // auth.resetAuthorizations: every other device of either door ends; the caller stays.
    let all = door
        .invoke(&functions::auth::ResetAuthorizations {})
        .await?;
    assert!(all);
    stream_ends(&mut laptop_stream).await?;
    assert_eq!(
        grpc_refusal(&laptop).await.as_deref(),
        Some("AUTH_KEY_UNREGISTERED")
    );
    assert_eq!(
        next_call_refusal(&mut other_door).await?,
        (401, "AUTH_KEY_UNREGISTERED".to_owned())
    );
    let enums::account::Authorizations::Authorizations(left) = door
        .invoke(&functions::account::GetAuthorizations {})
        .await?;
    assert_eq!(left.authorizations.len(), 1, "{left:?}");
    let enums::updates::State::State(state) = door.invoke(&functions::updates::GetState {}).await?;
    assert!(state.pts >= 1);
    Ok(())
}
