//! oxictl: a client for oxigram's gateway. Each device keeps its auth key and its applied pts
//! in a small JSON file (`.oxictl/<device>.json`), so several devices of several users can be
//! driven from one shell.

mod bench;

/// The bench client shares the machine with the system it measures: the allocator the services
/// use keeps its own CPU down too.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use oxictl::device::{self, Device, DeviceClient};
use oxigram_proto::{
    api::v1::{
        CreateAuthKeyRequest, GetDialogsRequest, GetDifferenceRequest, GetHistoryRequest,
        GetMeRequest, ResolvePhoneRequest, SendCodeRequest, SendMessageRequest, SignInRequest,
        SignUpRequest, StreamRequest, auth_client::AuthClient, stream_event,
    },
    types::v1::{Message, PtsUpdate, update},
};

#[derive(Parser)]
#[command(name = "oxictl", version, about = "oxigram's client CLI")]
struct Cli {
    /// The gateway's address, as `oxigram up` prints it.
    #[arg(
        long,
        global = true,
        env = "OXICTL_GATEWAY",
        default_value = "http://127.0.0.1:7710"
    )]
    gateway: String,
    /// Which device of this machine acts (a file under --state-dir).
    #[arg(long, global = true, env = "OXICTL_DEVICE", default_value = "default")]
    device: String,
    #[arg(
        long,
        global = true,
        env = "OXICTL_STATE_DIR",
        default_value = ".oxictl"
    )]
    state_dir: std::path::PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Creates an auth key for this device.
    Keygen,
    /// Signs this device in (signing up when the phone is new). The code is asked for unless given.
    Login {
        #[arg(long)]
        phone: String,
        #[arg(long)]
        code: Option<String>,
        /// First name, used when signing up.
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Shows the signed-in user.
    Me,
    /// Sends a text to a user, named by phone or id.
    Send {
        #[arg(long)]
        to: String,
        #[arg(long)]
        text: String,
        /// Reuse to resend the same message (idempotent).
        #[arg(long)]
        random_id: Option<i64>,
        #[arg(long, default_value_t = 0)]
        reply_to: i64,
    },
    /// Streams updates from the device's pts; applies only contiguous ones, filling gaps with getDifference.
    Watch {
        /// Stop after this many updates applied (default: run until Ctrl-C).
        #[arg(long)]
        count: Option<usize>,
        /// Stop after this many seconds.
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// Fetches and applies everything after the device's pts.
    Difference,
    /// A dialog's history, newest first.
    History {
        #[arg(long)]
        with: String,
        #[arg(long, default_value_t = 20)]
        limit: i32,
        #[arg(long, default_value_t = 0)]
        offset_id: i64,
    },
    /// The user's dialogs.
    Dialogs {
        #[arg(long, default_value_t = 20)]
        limit: i32,
    },
    /// Load generator: creates users, sends through the gateway, measures send and push
    /// latency, losses and duplicates, offline catch-up, getDifference, the dispatch drain
    /// rate and a raw-Postgres baseline; the last line of stdout is a JSON summary.
    Bench(bench::BenchArgs),
}

fn show(m: &Message) -> String {
    let dir = if m.out { "→" } else { "←" };
    format!(
        "#{} {dir} peer {} from {}: {}",
        m.id, m.peer_user_id, m.from_user_id, m.text
    )
}

fn show_update(u: &PtsUpdate, messages: &[Message]) -> String {
    let what = match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
        Some(update::Kind::NewMessage(n)) => {
            let id = n.message.as_ref().map_or(0, |m| m.id);
            // Prefer the message's current state when the difference carried it.
            match messages.iter().find(|m| m.id == id).or(n.message.as_ref()) {
                Some(m) => format!("new message {}", show(m)),
                None => "new message (deleted)".into(),
            }
        }
        Some(update::Kind::ReadHistoryInbox(r)) => {
            format!("read inbox of peer {} up to #{}", r.peer_user_id, r.max_id)
        }
        Some(update::Kind::ReadHistoryOutbox(r)) => {
            format!("peer {} read up to #{}", r.peer_user_id, r.max_id)
        }
        Some(update::Kind::DeliveredOutbox(r)) => {
            format!(
                "a device of peer {} stored up to #{}",
                r.peer_user_id, r.max_id
            )
        }
        None => "unknown update".into(),
    };
    format!("[pts {}] {what}", u.pts)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let path = cli.state_dir.join(format!("{}.json", cli.device));
    match cli.command {
        Command::Bench(args) => bench::run(&cli.gateway, args).await?,
        Command::Keygen => {
            let channel = device::connect(&cli.gateway).await?;
            let key = AuthClient::new(channel)
                .create_auth_key(CreateAuthKeyRequest {
                    device_model: format!("oxictl/{}", cli.device),
                })
                .await?
                .into_inner();
            let device = Device {
                gateway: cli.gateway.clone(),
                auth_key_id: key.auth_key_id,
                secret: key.secret,
                pts: 0,
            };
            device.save(&path)?;
            println!("auth key {} saved to {}", key.auth_key_id, path.display());
        }
        Command::Login { phone, code, name } => {
            let c = DeviceClient::open(&path).await?;
            let sent = c
                .auth()
                .send_code(SendCodeRequest {
                    phone: phone.clone(),
                })
                .await?
                .into_inner();
            let code = match code {
                Some(code) => code,
                None => {
                    eprint!("code (see the gateway's log): ");
                    let mut line = String::new();
                    std::io::stdin().read_line(&mut line)?;
                    line.trim().to_owned()
                }
            };
            let signed_in = c
                .auth()
                .sign_in(SignInRequest {
                    phone: phone.clone(),
                    phone_code_hash: sent.phone_code_hash.clone(),
                    code: code.clone(),
                })
                .await;
            let auth = match signed_in {
                Ok(a) => a.into_inner(),
                Err(s)
                    if oxigram_errors::code_of(&s).as_deref()
                        == Some("PHONE_NUMBER_UNOCCUPIED") =>
                {
                    // A new phone: the same code signs up.
                    c.auth()
                        .sign_up(SignUpRequest {
                            phone,
                            phone_code_hash: sent.phone_code_hash,
                            code,
                            first_name: if name.is_empty() { "User".into() } else { name },
                        })
                        .await?
                        .into_inner()
                }
                Err(s) => return Err(s.into()),
            };
            let user = auth.user.context("no user in the answer")?;
            println!(
                "signed in as user {} ({}, +{})",
                user.id, user.first_name, user.phone
            );
        }
        Command::Me => {
            let c = DeviceClient::open(&path).await?;
            let me = c.users().get_me(GetMeRequest {}).await?.into_inner();
            println!(
                "user {} ({}, +{}), device pts {}",
                me.id, me.first_name, me.phone, c.device.pts
            );
        }
        Command::Send {
            to,
            text,
            random_id,
            reply_to,
        } => {
            let mut c = DeviceClient::open(&path).await?;
            let peer = resolve(&mut c, &to).await?;
            let random_id = random_id.unwrap_or_else(|| rand::random_range(1..i64::MAX));
            let sent = c
                .messages()
                .send_message(SendMessageRequest {
                    peer_user_id: peer,
                    random_id,
                    text,
                    reply_to_msg_id: reply_to,
                    ..Default::default()
                })
                .await?
                .into_inner();
            let m = sent.message.context("no message in the answer")?;
            println!(
                "sent {} (random_id {random_id}, pts {})",
                show(&m),
                sent.pts
            );
            // Our own update is applied when it continues our state; otherwise the next
            // difference brings it.
            if sent.pts > 0 && sent.pts - sent.pts_count == c.device.pts {
                c.device.pts = sent.pts;
                c.device.save(&path)?;
            }
        }
        Command::Watch { count, timeout } => {
            let mut c = DeviceClient::open(&path).await?;
            let deadline = timeout.map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
            let mut stream = c
                .updates()
                .stream(StreamRequest { pts: c.device.pts })
                .await?
                .into_inner();
            println!("watching from pts {}", c.device.pts);
            let mut applied = 0usize;
            loop {
                if count.is_some_and(|n| applied >= n) {
                    break;
                }
                let next = match deadline {
                    Some(d) => match tokio::time::timeout_at(d, stream.message()).await {
                        Ok(n) => n?,
                        Err(_) => break,
                    },
                    None => stream.message().await?,
                };
                let Some(event) = next else { break };
                match event.kind {
                    Some(stream_event::Kind::Update(u)) => {
                        if u.pts <= c.device.pts {
                            continue; // already applied
                        }
                        if u.pts - u.pts_count == c.device.pts {
                            println!("{}", show_update(&u, &[]));
                            c.device.pts = u.pts;
                            applied += 1;
                        } else {
                            eprintln!(
                                "gap: have pts {}, got {}; fetching the difference",
                                c.device.pts, u.pts
                            );
                            applied += catch_up(&mut c).await?;
                        }
                        c.device.save(&path)?;
                    }
                    Some(stream_event::Kind::DifferenceNeeded(_)) => {
                        applied += catch_up(&mut c).await?;
                        c.device.save(&path)?;
                    }
                    None => {}
                }
            }
            println!("stopped at pts {}", c.device.pts);
        }
        Command::Difference => {
            let mut c = DeviceClient::open(&path).await?;
            let n = catch_up(&mut c).await?;
            c.device.save(&path)?;
            println!("applied {n} updates, now at pts {}", c.device.pts);
        }
        Command::History {
            with,
            limit,
            offset_id,
        } => {
            let mut c = DeviceClient::open(&path).await?;
            let peer = resolve(&mut c, &with).await?;
            let page = c
                .messages()
                .get_history(GetHistoryRequest {
                    peer_user_id: peer,
                    offset_id,
                    limit,
                    ..Default::default()
                })
                .await?
                .into_inner();
            for m in &page.messages {
                println!("{}", show(m));
            }
        }
        Command::Dialogs { limit } => {
            let c = DeviceClient::open(&path).await?;
            let page = c
                .dialogs()
                .get_dialogs(GetDialogsRequest {
                    limit,
                    ..Default::default()
                })
                .await?
                .into_inner();
            for d in &page.dialogs {
                let name = page
                    .users
                    .iter()
                    .find(|u| u.id == d.peer_user_id)
                    .map_or("?".to_owned(), |u| u.first_name.clone());
                let top = page
                    .messages
                    .iter()
                    .find(|m| m.id == d.top_message_id)
                    .map_or(String::new(), |m| m.text.clone());
                println!(
                    "peer {} ({name}): top #{} {top:?}, unread {}, read inbox ≤ #{}, read outbox ≤ #{}",
                    d.peer_user_id,
                    d.top_message_id,
                    d.unread_count,
                    d.read_inbox_max_id,
                    d.read_outbox_max_id
                );
            }
        }
    }
    Ok(())
}

/// A user id from a phone number (`+…` or digits with a leading `p:`) or a plain id.
async fn resolve(c: &mut DeviceClient, who: &str) -> anyhow::Result<i64> {
    if let Some(phone) = who.strip_prefix('+') {
        let user = c
            .users()
            .resolve_phone(ResolvePhoneRequest {
                phone: phone.into(),
            })
            .await?
            .into_inner();
        return Ok(user.id);
    }
    who.parse().context("name a user by id or by +phone")
}

/// Applies the difference from the device's pts until nothing is left; returns how many updates.
async fn catch_up(c: &mut DeviceClient) -> anyhow::Result<usize> {
    let mut applied = 0;
    loop {
        let diff = c
            .updates()
            .get_difference(GetDifferenceRequest {
                pts: c.device.pts,
                limit: 100,
            })
            .await?
            .into_inner();
        let state = diff.state.context("no state in the difference")?;
        if diff.too_long {
            println!(
                "difference too long: reload dialogs and history; continuing from pts {}",
                state.pts
            );
            c.device.pts = state.pts;
            return Ok(applied);
        }
        for u in &diff.updates {
            println!("{}", show_update(u, &diff.new_messages));
            applied += 1;
        }
        c.device.pts = state.pts;
        if !diff.is_slice {
            return Ok(applied);
        }
    }
}
