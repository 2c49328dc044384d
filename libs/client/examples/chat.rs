//! Two users exchange a message through a running gateway, each printing what its update
//! stream delivers.
//!
//! ```sh
//! OXIGRAM_GATEWAY__FIXED_LOGIN_CODE=24680 cargo run -p oxigram -- up
//! cargo run -p oxigram-client --example chat -- --code 24680
//! ```
//!
//! Options: `--gateway URL` (default `http://127.0.0.1:7710`), `--code CODE` (the gateway's
//! fixed login code), `--alice PHONE` and `--bob PHONE` (default 15550001 and 15550002; a
//! phone without an account is signed up).

use std::time::Duration;

use oxigram_client::{Client, Event, StreamOptions, UpdateStream, connect};
use oxigram_proto::{
    api::v1::SendMessageRequest,
    types::v1::{InputPeer, User, update},
};

struct Args {
    gateway: String,
    code: String,
    alice: String,
    bob: String,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        gateway: "http://127.0.0.1:7710".into(),
        code: "24680".into(),
        alice: "15550001".into(),
        bob: "15550002".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--gateway" => args.gateway = value,
            "--code" => args.code = value,
            "--alice" => args.alice = value,
            "--bob" => args.bob = value,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(args)
}

/// A new device signed in to the account of `phone` (signed up when it has none), with its
/// update stream opened at the account's current state.
async fn device(
    gateway: &str,
    phone: &str,
    code: &str,
    name: &str,
) -> Result<(Client, User, UpdateStream), oxigram_client::Error> {
    let client = Client::create(connect(gateway).await?, "oxigram-client example")
        .await?
        .with_deadline(Duration::from_secs(5));
    let login = client.request_code(phone).await?;
    let user = client.sign_in_or_up(&login, code, name).await?;
    let state = client.get_state().await?.into();
    let updates = UpdateStream::open(client.clone(), state, StreamOptions::default()).await?;
    println!(
        "{name} is user {} (+{}), at pts {}",
        user.id,
        user.phone,
        updates.state().pts
    );
    Ok((client, user, updates))
}

/// Prints `who`'s events until a new message from someone else arrives; returns its text.
async fn receive(who: &str, updates: &mut UpdateStream) -> Result<String, String> {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), updates.next())
            .await
            .map_err(|_| format!("{who} received nothing within 10 s"))?;
        match event {
            Event::Update(applied) => {
                let u = &applied.update;
                match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
                    Some(update::Kind::NewMessage(n)) => {
                        let Some(m) = &n.message else { continue };
                        let direction = if m.out { "sent" } else { "received" };
                        println!(
                            "{who} [pts {}, by {:?}]: {direction} #{} {:?}",
                            u.pts, applied.source, m.id, m.text
                        );
                        if !m.out {
                            return Ok(m.text.clone());
                        }
                    }
                    other => println!("{who} [pts {}]: {other:?}", u.pts),
                }
            }
            other => println!("{who}: {other:?}"),
        }
    }
}

async fn chat(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let (alice, alice_user, mut alice_updates) =
        device(&args.gateway, &args.alice, &args.code, "Alice").await?;
    let (bob, bob_user, mut bob_updates) =
        device(&args.gateway, &args.bob, &args.code, "Bob").await?;

    let sent = alice
        .send_message(SendMessageRequest {
            peer: Some(InputPeer::user(bob_user.id)),
            random_id: rand::random_range(1..i64::MAX),
            text: "hello Bob".into(),
            ..Default::default()
        })
        .await?;
    // Alice's own update comes with the answer: her stream applies it in pts order.
    alice_updates.answer(sent);
    receive("Bob", &mut bob_updates).await?;

    let sent = bob
        .send_message(SendMessageRequest {
            peer: Some(InputPeer::user(alice_user.id)),
            random_id: rand::random_range(1..i64::MAX),
            text: "hello Alice".into(),
            ..Default::default()
        })
        .await?;
    bob_updates.answer(sent);
    receive("Alice", &mut alice_updates).await?;

    let read = bob.read_history(InputPeer::user(alice_user.id), 0).await?;
    println!("Bob read the chat, now at pts {}", read.pts);
    Ok(())
}

#[tokio::main]
async fn main() {
    let args = match args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!(
                "{e}\nusage: chat [--gateway URL] [--code CODE] [--alice PHONE] [--bob PHONE]"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = chat(args).await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
