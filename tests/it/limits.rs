//! The gateway's limits on costly calls beyond sends: login codes per phone, login calls per
//! auth key, getDifference calls and stream opens per device, each answered FLOOD_WAIT_X past
//! its limit while the same call for another phone or device goes on.

use oxigram_proto::api::v1::SendCodeRequest;
use oxigram_tests::{Mode, System, client::code};

/// The FLOOD_WAIT_X seconds of a refusal, or what the call answered instead.
fn flood_wait<T: std::fmt::Debug>(answer: Result<T, tonic::Status>) -> anyhow::Result<u32> {
    let status = match answer {
        Ok(ok) => anyhow::bail!("not limited: {ok:?}"),
        Err(status) => status,
    };
    let stable = code(&status).unwrap_or_default();
    let wait = stable
        .strip_prefix("FLOOD_WAIT_")
        .ok_or_else(|| anyhow::anyhow!("not a flood wait: {status:?}"))?;
    Ok(wait.parse()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costly_calls_are_limited_per_phone_key_and_device() -> anyhow::Result<()> {
    let (mut config, ground) = System::config().await?;
    config.limits.send_code_per_phone = 2;
    config.limits.login_per_key = 5;
    config.limits.difference_per_device = 2;
    config.limits.stream_opens_per_device = 2;
    let system = System::start_with(config, ground, Mode::OneProcess).await?;

    // Codes per phone: the third to one phone waits (a limit of 2 a minute: one per 30 s).
    let device = system.device().await?;
    let send_code = |phone: &str| {
        let mut auth = device.auth();
        let request = SendCodeRequest {
            phone: phone.into(),
        };
        async move { auth.send_code(request).await }
    };
    send_code("15559001").await?;
    send_code("15559001").await?;
    let wait = flood_wait(send_code("15559001").await)?;
    assert!((1..=30).contains(&wait), "waits {wait} s");
    // Another phone has its own limit, but the key's login calls are counted too.
    send_code("15559002").await?;
    send_code("15559002").await?;
    flood_wait(send_code("15559003").await)?;

    // Per device: getDifference and stream opens.
    let mut alice = system.device().await?;
    alice.sign_up("15559010", "Alice").await?;
    alice.difference(0).await?;
    alice.difference(0).await?;
    flood_wait(alice.difference(0).await)?;
    let mut streams = Vec::new();
    for _ in 0..2 {
        streams.push(alice.stream(0).await?);
    }
    flood_wait(alice.stream(0).await)?;
    // Another device of another user is not held back.
    let mut bob = system.device().await?;
    bob.sign_up("15559011", "Bob").await?;
    bob.difference(0).await?;
    let _bob_stream = bob.stream(0).await?;
    Ok(())
}
