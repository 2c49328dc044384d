//! `auth.bindTempAuthKey` over TCP: a temporary key bound to a permanent one acts for it, a
//! bad binding message is refused with Telegram's codes, and a temporary key ends at its
//! expiry whether or not the backend still holds it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oxigram_mtproto::AuthKey;
use oxigram_mtproto::client::{BindDraft, Client, ClientError, Options};
use oxigram_mtproto::crypto::Direction;
use oxigram_mtproto::envelope::Message;
use oxigram_mtproto::handshake::boxed;
use oxigram_tl::{enums, functions};

use crate::start;

fn now() -> i32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i32)
        .unwrap_or(0)
}

/// The key the server says the client's calls act as.
async fn acting(client: &mut Client) -> Result<i64, ClientError> {
    let enums::help::SupportName::Name(name) =
        client.invoke(&functions::help::GetSupportName {}).await?;
    name.name
        .parse()
        .map_err(|_| ClientError::Decode(name.name.clone()))
}

fn rpc_error(result: &Result<bool, ClientError>, message: &str) -> bool {
    matches!(result, Err(ClientError::Rpc(e)) if e.code == 400 && e.message == message)
}

#[tokio::test]
async fn a_bound_temporary_key_acts_for_its_permanent_key() -> Result<(), ClientError> {
    let (addr, backend) = start().await;
    let mut permanent = Client::connect(&addr, backend.key.public(), Options::default()).await?;
    let perm = permanent.auth_key().clone();
    assert_eq!(acting(&mut permanent).await?, perm.id());

    let mut temp =
        Client::connect_temporary(&addr, backend.key.public(), Options::default(), 3600).await?;
    let temp_id = temp.auth_key().id();
    assert_eq!(acting(&mut temp).await?, temp_id, "unbound, it is itself");
    let expires_at = now() + 3600;
    assert!(temp.bind_temp_key(&perm, expires_at).await?);
    assert_eq!(backend.binds(), [(temp_id, perm.id())].into());
    assert_eq!(acting(&mut temp).await?, perm.id());
    // Binding it again to the same permanent key changes nothing.
    assert!(temp.bind_temp_key(&perm, expires_at).await?);
    assert_eq!(backend.binds(), [(temp_id, perm.id())].into());

    // Another temporary key bound to the same permanent key replaces the first.
    let mut second =
        Client::connect_temporary(&addr, backend.key.public(), Options::default(), 3600).await?;
    assert!(second.bind_temp_key(&perm, expires_at).await?);
    assert_eq!(
        backend.binds(),
        [(second.auth_key().id(), perm.id())].into()
    );
    assert_eq!(acting(&mut second).await?, perm.id());
    assert_eq!(
        acting(&mut temp).await?,
        temp_id,
        "replaced, it is itself again"
    );

    // A reconnect over the bound temporary key still acts for the permanent key.
    let key = second.auth_key().clone();
    drop(second);
    let mut again = Client::reconnect(&addr, key, Options::default()).await?;
    assert_eq!(acting(&mut again).await?, perm.id());
    Ok(())
}

type Change = Box<dyn Fn(&mut BindDraft)>;

#[tokio::test]
async fn bad_bindings_are_refused_with_telegram_codes() -> Result<(), ClientError> {
    let (addr, backend) = start().await;
    let server = || backend.key.public();
    let mut permanent = Client::connect(&addr, server(), Options::default()).await?;
    let perm = permanent.auth_key().clone();
    let other: AuthKey = Client::connect(&addr, server(), Options::default())
        .await?
        .auth_key()
        .clone();
    let other_temp: AuthKey = Client::connect_temporary(&addr, server(), Options::default(), 3600)
        .await?
        .auth_key()
        .clone();
    let mut temp = Client::connect_temporary(&addr, server(), Options::default(), 3600).await?;
    let temp_key = temp.auth_key().clone();
    let expires_at = now() + 3600;

    let (other_id, other_temp_id) = (other.id(), other_temp.id());
    let cases: Vec<(&str, Change)> = vec![
        (
            "encrypted with the temporary key",
            Box::new(move |d| d.encrypt_with = temp_key.clone()),
        ),
        (
            "encrypted with another permanent key",
            Box::new(move |d| d.encrypt_with = other.clone()),
        ),
        (
            // What the server wrongly accepted before: the binding message under MTProto 2.0.
            "an MTProto 2.0 envelope",
            Box::new(|d| {
                let message = Message {
                    salt: 0,
                    session_id: 0,
                    msg_id: d.inner_msg_id,
                    seq_no: 0,
                    body: boxed(&d.inner),
                };
                d.encrypted_message =
                    Some(message.encrypt(&d.encrypt_with, Direction::ClientToServer));
            }),
        ),
        (
            "a ciphertext byte changed",
            Box::new(|d| {
                let mut bytes = oxigram_mtproto::bind::encrypt(
                    &d.encrypt_with,
                    d.inner_msg_id,
                    d.inner_seq_no,
                    &d.inner,
                );
                let last = bytes.len() - 1;
                bytes[last] ^= 1;
                d.encrypted_message = Some(bytes);
            }),
        ),
        ("another nonce inside", Box::new(|d| d.inner.nonce ^= 1)),
        (
            "another temporary key inside",
            Box::new(|d| d.inner.temp_auth_key_id ^= 1),
        ),
        (
            "another permanent key inside",
            Box::new(move |d| d.inner.perm_auth_key_id = other_id),
        ),
        (
            "the call names another permanent key",
            Box::new(move |d| d.perm_auth_key_id = other_id),
        ),
        (
            "another session inside",
            Box::new(|d| d.inner.temp_session_id ^= 1),
        ),
        (
            "another expiry inside",
            Box::new(|d| d.inner.expires_at += 1),
        ),
        ("another msg_id inside", Box::new(|d| d.inner_msg_id += 4)),
        ("seq_no not 0 inside", Box::new(|d| d.inner_seq_no = 1)),
        (
            "an unknown permanent key",
            Box::new(|d| {
                d.perm_auth_key_id = 0x5eed;
                d.inner.perm_auth_key_id = 0x5eed;
            }),
        ),
        (
            "a temporary key as the permanent one",
            Box::new(move |d| {
                d.perm_auth_key_id = other_temp_id;
                d.inner.perm_auth_key_id = other_temp_id;
                d.encrypt_with = other_temp.clone();
            }),
        ),
    ];
    for (name, change) in cases {
        let result = temp.bind_temp_key_with(&perm, expires_at, change).await;
        assert!(
            rpc_error(&result, "ENCRYPTED_MESSAGE_INVALID"),
            "{name}: {result:?}"
        );
    }
    assert!(backend.binds().is_empty(), "no bad binding was stored");

    // The same session binds with a good message afterwards.
    assert!(temp.bind_temp_key(&perm, expires_at).await?);
    assert_eq!(backend.binds(), [(temp.auth_key().id(), perm.id())].into());

    // A call over a permanent key binds nothing.
    let result = permanent.bind_temp_key(&perm, expires_at).await;
    assert!(rpc_error(&result, "TEMP_AUTH_KEY_EMPTY"), "{result:?}");
    // A temporary key bound to one permanent key cannot be bound to another.
    let another = Client::connect(&addr, server(), Options::default()).await?;
    let result = temp.bind_temp_key(another.auth_key(), expires_at).await;
    assert!(
        rpc_error(&result, "TEMP_AUTH_KEY_ALREADY_BOUND"),
        "{result:?}"
    );
    assert_eq!(backend.binds(), [(temp.auth_key().id(), perm.id())].into());
    Ok(())
}

#[tokio::test]
async fn a_temporary_key_is_unknown_once_it_expires() -> Result<(), ClientError> {
    let (addr, backend) = start().await;
    let server = || backend.key.public();
    let perm = Client::connect(&addr, server(), Options::default())
        .await?
        .auth_key()
        .clone();
    // One expires by its own expires_in, the other by the binding's earlier expiry.
    let mut short = Client::connect_temporary(&addr, server(), Options::default(), 2).await?;
    let mut bound = Client::connect_temporary(&addr, server(), Options::default(), 3600).await?;
    assert!(bound.bind_temp_key(&perm, now() + 2).await?);
    assert_eq!(acting(&mut short).await?, short.auth_key().id());
    assert_eq!(acting(&mut bound).await?, perm.id());

    tokio::time::sleep(Duration::from_secs(3)).await;
    for (name, client) in [("expires_in", &mut short), ("binding", &mut bound)] {
        let key = client.auth_key().clone();
        // On the open connection, and on a new one although the backend still holds the key.
        let open = acting(client).await;
        assert!(
            matches!(open, Err(ClientError::Transport(-404))),
            "{name}: {open:?}"
        );
        assert!(backend.keys.lock().is_ok_and(|k| k.contains_key(&key.id())));
        let mut again = Client::reconnect(&addr, key, Options::default()).await?;
        let fresh = acting(&mut again).await;
        assert!(
            matches!(fresh, Err(ClientError::Transport(-404))),
            "{name}: {fresh:?}"
        );
    }
    // A permanent key does not expire.
    let mut permanent = Client::reconnect(&addr, perm.clone(), Options::default()).await?;
    assert_eq!(acting(&mut permanent).await?, perm.id());
    Ok(())
}

#[tokio::test]
async fn a_temporary_key_the_backend_ended_cannot_bind_and_gets_404() -> Result<(), ClientError> {
    let (addr, backend) = start().await;
    let server = || backend.key.public();
    let perm = Client::connect(&addr, server(), Options::default())
        .await?
        .auth_key()
        .clone();
    let mut temp = Client::connect_temporary(&addr, server(), Options::default(), 3600).await?;
    assert_eq!(acting(&mut temp).await?, temp.auth_key().id());
    // Ended while its connection is open: a bind over it (which would end the permanent key's
    // current temporary key) is the transport's -404, and binds nothing.
    backend.forget(temp.auth_key().id());
    let bind = temp.bind_temp_key(&perm, now() + 3600).await;
    assert!(
        matches!(bind, Err(ClientError::Transport(-404))),
        "{bind:?}"
    );
    assert!(backend.binds().is_empty());
    Ok(())
}
