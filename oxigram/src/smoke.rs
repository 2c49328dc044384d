//! `oxigram smoke`: an end-to-end check of a running installation through its gateway, as a
//! client app would use it: two new users sign up (with the gateway's fixed login code), one
//! sends the other a message, and the other finds it in the history. The chart's `helm test`
//! runs it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use oxigram_client::Client;
use oxigram_proto::{
    api::v1::{GetHistoryRequest, SendMessageRequest},
    types::v1::InputPeer,
};

/// Signs a new device up as a new user with a phone number no one else uses.
async fn new_user(
    gateway: &str,
    code: &str,
    name: &str,
    phone: &str,
) -> anyhow::Result<(Client, i64)> {
    let channel = oxigram_client::connect(gateway)
        .await
        .with_context(|| format!("cannot reach the gateway at {gateway}"))?;
    let client = Client::create(channel, "oxigram smoke").await?;
    let login = client.request_code(phone).await?;
    let user = client
        .sign_up(&login, code, name)
        .await
        .context("sign-up refused (is the gateway's fixed_login_code the code given here?)")?;
    Ok((client, user.id))
}

/// Runs the check; an error says which step failed.
pub async fn run(gateway: &str, login_code: &str) -> anyhow::Result<()> {
    // Numbers of the form 1999ddddddd, distinct between runs.
    let seed = SystemTime::now().duration_since(UNIX_EPOCH)?.as_micros() % 1_000_000_000;
    let (alice, _) = new_user(gateway, login_code, "Smoke A", &format!("1999{seed:09}")).await?;
    let (bob, bob_id) = new_user(gateway, login_code, "Smoke B", &format!("1998{seed:09}")).await?;
    let text = format!("smoke test {seed}");
    alice
        .messages()
        .send_message(SendMessageRequest {
            peer: Some(InputPeer::user(bob_id)),
            random_id: i64::try_from(seed)?,
            text: text.clone(),
            ..Default::default()
        })
        .await
        .context("send refused")?;
    let alice_id = alice.get_me().await?.id;
    // The recipient's copy is written in the send's transaction; the history reads it.
    for _ in 0..20 {
        let history = bob
            .messages()
            .get_history(GetHistoryRequest {
                peer: Some(InputPeer::user(alice_id)),
                limit: 10,
                ..Default::default()
            })
            .await
            .context("history refused")?
            .into_inner();
        if history.messages.iter().any(|m| m.text == text) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    anyhow::bail!("the message sent was not in the recipient's history")
}
