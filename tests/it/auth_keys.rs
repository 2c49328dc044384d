//! Auth keys across gateway instances on one database: each instance keeps resolved keys in
//! its cache for long, and a sign-out, a reset or a sign-in through another instance still
//! takes effect on it within seconds.

use std::time::{Duration, Instant};

use oxigram_client::Client;
use oxigram_proto::api::v1::{LogOutRequest, ResetAuthorizationRequest};
use oxigram_tests::{Mode, System, TestClient, eventually};

/// Well past the instances' check of rebound keys (every second), far below the cache's life.
const WITHIN: Duration = Duration::from_secs(4);

/// The same device (auth key) as `device`, calling through `gateway`.
async fn same_key_at(device: &TestClient, gateway: &str) -> anyhow::Result<Client> {
    let channel = oxigram_client::connect(gateway).await?;
    Ok(Client::new(channel, device.auth_key().clone())?)
}

/// Waits until `client`'s calls answer `code`; returns how long it took.
async fn refused_within(client: &Client, code: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    eventually(WITHIN, code, || async {
        let answer = client.get_me().await;
        Ok(answer.err().filter(|e| e.code() == code).map(|_| ()))
    })
    .await?;
    Ok(start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_ins_and_sign_outs_reach_the_other_gateways_cache() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let other = system.start_extra_gateway().await?;

    let mut alice = system.device().await?;
    alice.sign_up("15559401", "Alice").await?;
    let mut laptop = system.device().await?;
    laptop.sign_in("15559401").await?;

    // Both devices are known to gateway B, which keeps their keys cached from now on.
    let alice_on_b = same_key_at(&alice, &other.endpoint).await?;
    let laptop_on_b = same_key_at(&laptop, &other.endpoint).await?;
    for _ in 0..3 {
        assert_eq!(alice_on_b.get_me().await?.id, alice.user_id()?);
        assert_eq!(laptop_on_b.get_me().await?.id, alice.user_id()?);
        tokio::time::sleep(Duration::from_millis(700)).await;
    }

    // Signed out through gateway A: B refuses the key within seconds.
    alice.auth().log_out(LogOutRequest {}).await?;
    let took = refused_within(&alice_on_b, "AUTH_KEY_UNREGISTERED").await?;
    eprintln!("a sign-out through A reached B's cache after {took:?}");
    // The laptop is untouched.
    assert_eq!(laptop_on_b.get_me().await?.id, alice.user_id()?);

    // Signed in again through A: B knows the key's new binding within seconds too.
    alice.sign_in("15559401").await?;
    eventually(WITHIN, "B to see the sign-in", || async {
        Ok(alice_on_b.get_me().await.is_ok().then_some(()))
    })
    .await?;

    // The laptop reset through A: refused on B.
    alice
        .auth()
        .reset_authorization(ResetAuthorizationRequest {
            auth_key_id: laptop.auth_key_id,
        })
        .await?;
    refused_within(&laptop_on_b, "AUTH_KEY_UNREGISTERED").await?;
    assert_eq!(alice_on_b.get_me().await?.id, alice.user_id()?);
    Ok(())
}
