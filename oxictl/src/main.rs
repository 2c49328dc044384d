//! oxictl: a client for oxigram's gateway. Each device keeps its auth key and its applied pts
//! in a small JSON file (`.oxictl/<device>.json`), so several devices of several users can be
//! driven from one shell; `send-file` and `download` move files through media messages.
//! `oxictl admin` is the operator's: the outbox rows each service kept as failed, and
//! requeueing them.

mod admin;
mod admin_limits;
mod bench;
mod device;
mod files;
mod format;
mod people;
mod presence;
mod progress;
mod settings;

/// The bench client shares the machine with the system it measures: the allocator the services
/// use keeps its own CPU down too.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use device::{Device, DeviceClient};
use oxigram_client::{
    Client, Event, Sequencer, StreamOptions, UpdateStream, deleted_update, edited_update,
    sent_update,
};
use oxigram_proto::{
    api::v1::{
        DeleteHistoryRequest, DeleteMessagesRequest, EditMessageRequest, ForwardMessagesRequest,
        GetDialogsRequest, GetHistoryRequest, SearchRequest, SendMessageRequest,
    },
    types::v1::{InputPeer, Message, MessageEntity, PtsUpdate, ReactionCount, update},
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
        /// Formatting, repeated: KIND:OFFSET:LENGTH[:ARG] in UTF-16 code units, e.g.
        /// `bold:0:5`, `text_url:6:4:https://example.com`, `pre:0:9:rust`,
        /// `mention_name:0:3:USER_ID`.
        #[arg(long = "entity", value_parser = format::parse_entity)]
        entities: Vec<MessageEntity>,
        /// With --reply-to: the part of the replied message's text to quote.
        #[arg(long)]
        quote: Option<String>,
        /// Where the quote is in the replied text (UTF-16 code units); else where it first
        /// occurs.
        #[arg(long)]
        quote_offset: Option<i32>,
    },
    /// Sends a file as a media message: instantly when the server holds its content already
    /// (by SHA-256), else uploaded in parts of 512 KiB; prints the sent message.
    SendFile(files::SendFileArgs),
    /// Saves the file of a media message (its id in your dialog with the peer), checking its
    /// size and SHA-256; prints where it is.
    Download(files::DownloadArgs),
    /// Edits the text of one of your messages, named by its id in the dialog with a user.
    Edit {
        #[arg(long)]
        with: String,
        #[arg(long)]
        id: i64,
        #[arg(long)]
        text: String,
        /// The new text's formatting, as for `send`.
        #[arg(long = "entity", value_parser = format::parse_entity)]
        entities: Vec<MessageEntity>,
    },
    /// Forwards your messages, named by their ids in the dialog with a user, to a user (`me`:
    /// Saved Messages).
    Forward {
        /// The dialog the messages are in (phone, id or `me`).
        #[arg(long)]
        from: String,
        /// Their ids there, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<i64>,
        /// Who gets them (phone, id or `me`).
        #[arg(long)]
        to: String,
        /// Send them as your own, without the forward header.
        #[arg(long)]
        drop_author: bool,
    },
    /// Deletes your messages, named by their ids (your own, comma-separated); with --revoke
    /// for the other side too.
    Delete {
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<i64>,
        #[arg(long)]
        revoke: bool,
    },
    /// Marks voice or video notes you received as played, named by their ids (your own,
    /// comma-separated): their senders see them played too.
    ReadContents {
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<i64>,
    },
    /// Reacts to a message of the dialog with a user (your id of it) with an emoji, replacing
    /// your previous reaction; without an emoji, removes it.
    React {
        peer: String,
        msg_id: i64,
        emoji: Option<String>,
    },
    /// Marks the reactions to your messages of the dialog with a user as seen.
    ReadReactions { peer: String },
    /// Clears the dialog with a user, in batches until nothing is left: the dialog leaves
    /// the list unless --just-clear; --revoke clears the other side too.
    Clear {
        #[arg(long)]
        with: String,
        #[arg(long)]
        just_clear: bool,
        #[arg(long)]
        revoke: bool,
        /// Only messages up to this id (0 = all).
        #[arg(long, default_value_t = 0)]
        max_id: i64,
    },
    /// Tells a user (phone or id) what you are doing in the chat: `typing` (the default),
    /// `cancel`, `record_audio`, `upload_photo:40` (percent), `choose_sticker`, …
    Typing {
        #[arg(long)]
        to: String,
        #[arg(default_value = "typing", value_parser = presence::parse_action)]
        action: oxigram_proto::types::v1::SendMessageAction,
    },
    /// Says you went away (`offline`) or came back (`online`).
    Status {
        #[arg(value_parser = ["online", "offline"])]
        presence: String,
    },
    /// Streams updates from the device's pts; applies only contiguous ones, filling gaps with
    /// getDifference. Also prints who is typing and who comes online or goes offline.
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
    /// The user's messages containing a text (3 to 256 characters, any case), newest first:
    /// in the dialog with one user, or in every dialog.
    Search {
        #[arg(long)]
        q: String,
        /// Only the dialog with this user (phone or id).
        #[arg(long)]
        with: Option<String>,
        /// Only messages sent by this user (phone or id).
        #[arg(long)]
        from: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: i32,
        /// The next page: the key the previous page printed.
        #[arg(long, default_value_t = 0)]
        offset_id: i64,
    },
    /// The user's dialogs: a folder's (0 the main list, 1 the archive) or a dialog filter's;
    /// pinned ones first.
    Dialogs {
        #[arg(long, default_value_t = 20)]
        limit: i32,
        #[arg(long, default_value_t = 0)]
        folder: i32,
        /// A dialog filter's id (see `folder list`).
        #[arg(long, default_value_t = 0)]
        filter: i32,
    },
    /// Pins a dialog (--off unpins it), or sets the order of a folder's pinned dialogs.
    Pin(settings::PinArgs),
    /// Moves dialogs to the archive (--undo: back to the main list).
    Archive(settings::ArchiveArgs),
    /// Mutes a dialog, for good or for a while (--off unmutes).
    Mute(settings::MuteArgs),
    /// Saves the draft of a dialog, kept for the user's other devices (no text clears it).
    Draft(settings::DraftArgs),
    /// Dialog filters (custom folders): list, set, delete, order.
    Folder {
        #[command(subcommand)]
        command: settings::FolderCommand,
    },
    /// Your contacts: import by phone, list, delete.
    #[command(subcommand)]
    Contacts(people::ContactsCommand),
    /// Your username, or another user's by hers.
    #[command(subcommand)]
    Username(people::UsernameCommand),
    /// Your privacy rules: who sees your phone, last seen and photo, who finds you by phone.
    #[command(subcommand)]
    Privacy(people::PrivacyCommand),
    /// Load generator: creates users, sends through the gateway, measures send and push
    /// latency, losses and duplicates, offline catch-up, getDifference, the dispatch drain
    /// rate and a raw-Postgres baseline; the last line of stdout is a JSON summary.
    Bench(bench::BenchArgs),
    /// The operator's admin API of every outbox-owning service: the outbox rows kept as failed
    /// (`failed`) and putting them back in the relay's hands (`requeue`). Authorised by the
    /// services' `[admin] token`.
    Admin(admin::AdminArgs),
}

fn show(m: &Message) -> String {
    let dir = if m.out { "→" } else { "←" };
    let forwarded = match &m.fwd_from {
        Some(f) => {
            let saved = match f.saved_from_peer.and_then(|p| p.user_id()) {
                Some(peer) => format!(", saved from peer {peer} #{}", f.saved_from_msg_id),
                None => String::new(),
            };
            format!(
                " [forwarded from {} #{} of {}{saved}]",
                f.from_user_id, f.msg_id, f.date
            )
        }
        None => String::new(),
    };
    // A media message says what it carries; `download` fetches it by the message's id.
    let media = match &m.media {
        Some(x) => {
            let kind = oxigram_proto::types::v1::message_media::Kind::try_from(x.kind)
                .map_or("media".to_owned(), |k| k.as_str_name().to_ascii_lowercase());
            format!(" [{kind} {:?}, {} bytes]", x.file_name, x.size)
        }
        None => String::new(),
    };
    format!(
        "#{} {dir} peer {} from {}{forwarded}{media}: {}{}{}{}",
        m.id,
        m.peer_user(),
        m.from_user_id,
        m.text,
        format::show_entities(&m.entities),
        format::show_quote(m.reply_quote.as_ref()),
        show_reactions(&m.reactions)
    )
}

/// An update as one line; a new message from a difference is in its current state already.
fn show_update(u: &PtsUpdate) -> String {
    let what = match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
        Some(update::Kind::NewMessage(n)) => match &n.message {
            // The sender's own message: the send it settles.
            Some(m) if n.random_id != 0 => {
                format!("new message {} (random_id {})", show(m), n.random_id)
            }
            Some(m) => format!("new message {}", show(m)),
            None => "new message (deleted)".into(),
        },
        Some(update::Kind::ReadHistoryInbox(r)) => {
            format!("read inbox of peer {} up to #{}", r.peer_user(), r.max_id)
        }
        Some(update::Kind::ReadHistoryOutbox(r)) => {
            format!("peer {} read up to #{}", r.peer_user(), r.max_id)
        }
        Some(update::Kind::DeliveredOutbox(r)) => {
            format!(
                "a device of peer {} stored up to #{}",
                r.peer_user(),
                r.max_id
            )
        }
        Some(update::Kind::EditMessage(e)) => match &e.message {
            Some(m) => format!("edited message {}", show(m)),
            None => "edited message (deleted)".into(),
        },
        Some(update::Kind::DeleteMessages(d)) => {
            let ids: Vec<String> = d.ids.iter().map(|id| format!("#{id}")).collect();
            format!("deleted messages {}", ids.join(", "))
        }
        Some(update::Kind::ReadMessageContents(r)) => {
            let ids: Vec<String> = r.messages.iter().map(|id| format!("#{id}")).collect();
            format!("played messages {}", ids.join(", "))
        }
        Some(update::Kind::MessageReactions(r)) => format!(
            "reactions to #{} with peer {}:{}{}",
            r.msg_id,
            r.peer_user(),
            match show_reactions(&r.reactions).as_str() {
                "" => " none".to_owned(),
                shown => shown.to_owned(),
            },
            if r.reaction_unread { " (unread)" } else { "" }
        ),
        Some(update::Kind::ReadReactions(r)) => {
            let ids: Vec<String> = r.messages.iter().map(|id| format!("#{id}")).collect();
            format!(
                "read reactions with peer {}: {}",
                r.peer_user(),
                ids.join(", ")
            )
        }
        Some(update::Kind::DialogPinned(p)) => format!(
            "{} dialog with peer {}",
            if p.pinned { "pinned" } else { "unpinned" },
            p.peer_user()
        ),
        Some(update::Kind::PinnedDialogs(p)) => {
            let order: Vec<String> = p
                .order
                .iter()
                .filter_map(|p| p.user_id())
                .map(|id| id.to_string())
                .collect();
            format!(
                "pinned dialogs of folder {}: [{}]",
                p.folder_id,
                order.join(", ")
            )
        }
        Some(update::Kind::FolderPeers(f)) => {
            let moves: Vec<String> = f
                .folder_peers
                .iter()
                .map(|fp| format!("peer {} → folder {}", fp.peer_user(), fp.folder_id))
                .collect();
            format!("moved {}", moves.join(", "))
        }
        Some(update::Kind::DialogUnreadMark(m)) => format!(
            "dialog with peer {} {}",
            m.peer_user(),
            if m.unread {
                "marked unread"
            } else {
                "unread mark taken away"
            }
        ),
        Some(update::Kind::NotifySettings(n)) => {
            let s = n.settings.unwrap_or_default();
            format!(
                "notify settings of peer {}: muted until {}, silent {:?}, previews {:?}",
                n.peer_user(),
                s.mute_until,
                s.silent,
                s.show_previews
            )
        }
        Some(update::Kind::DraftMessage(d)) => match (&d.draft, d.clears_pts) {
            (Some(draft), _) => format!("draft for peer {}: {:?}", d.peer_user(), draft.text),
            (None, 0) => format!("draft for peer {} cleared", d.peer_user()),
            (None, pts) => format!(
                "draft for peer {} cleared by a sent message (the draft of pts {pts})",
                d.peer_user()
            ),
        },
        Some(update::Kind::DialogFilter(f)) => match &f.filter {
            Some(filter) => format!("dialog {}", settings::show_filter(filter)),
            None => format!("dialog filter {} deleted", f.id),
        },
        Some(update::Kind::DialogFilterOrder(o)) => format!("dialog filters ordered {:?}", o.order),
        Some(update::Kind::PeerSettingsBarHidden(h)) => {
            format!("peer settings bar of peer {} hidden", h.peer_user())
        }
        Some(update::Kind::Profile(p)) => match &p.user {
            Some(u) => format!("profile now {}", people::show_user(u)),
            None => "profile changed".into(),
        },
        Some(update::Kind::Privacy(p)) => match &p.rule {
            Some(rule) => format!("privacy rule {}", people::show_rule(rule)),
            None => "privacy changed".into(),
        },
        Some(update::Kind::Contact(c)) if c.deleted => {
            format!("contact {} deleted", c.user_id)
        }
        Some(update::Kind::Contact(c)) => {
            let name = format!("{} {}", c.first_name, c.last_name);
            format!("contact {} is {}", c.user_id, name.trim_end())
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
        Command::Admin(args) => admin::run(args).await?,
        Command::Keygen => {
            let channel = oxigram_client::connect(&cli.gateway).await?;
            let client = Client::create(channel, &format!("oxictl/{}", cli.device)).await?;
            let key = client.auth_key();
            let device = Device {
                gateway: cli.gateway.clone(),
                auth_key_id: key.id,
                secret: key.secret.clone(),
                pts: 0,
            };
            device.save(&path)?;
            println!("auth key {} saved to {}", key.id, path.display());
        }
        Command::Login { phone, code, name } => {
            let c = DeviceClient::open(&path).await?;
            let login = c.client.request_code(&phone).await?;
            let code = match code {
                Some(code) => code,
                None => {
                    eprint!("code (see the gateway's log): ");
                    let mut line = String::new();
                    std::io::stdin().read_line(&mut line)?;
                    line.trim().to_owned()
                }
            };
            let name = if name.is_empty() { "User" } else { &name };
            let user = c.client.sign_in_or_up(&login, &code, name).await?;
            println!(
                "signed in as user {} ({}, +{})",
                user.id, user.first_name, user.phone
            );
        }
        Command::Me => {
            let c = DeviceClient::open(&path).await?;
            let me = c.client.get_me().await?;
            println!("{}, device pts {}", people::show_user(&me), c.device.pts);
        }
        Command::Send {
            to,
            text,
            random_id,
            reply_to,
            entities,
            quote,
            quote_offset,
        } => {
            let request = SendMessageRequest {
                random_id: random_id.unwrap_or_else(|| rand::random_range(1..i64::MAX)),
                text,
                reply_to_msg_id: reply_to,
                entities,
                quote_text: quote.unwrap_or_default(),
                quote_offset,
                ..Default::default()
            };
            send(&path, &to, request).await?
        }
        Command::SendFile(args) => files::send_file(&path, args).await?,
        Command::Download(args) => files::download(&path, args).await?,
        Command::Edit {
            with,
            id,
            text,
            entities,
        } => edit(&path, &with, id, text, entities).await?,
        Command::Forward {
            from,
            ids,
            to,
            drop_author,
        } => forward(&path, &from, ids, &to, drop_author).await?,
        Command::Delete { ids, revoke } => delete(&path, ids, revoke).await?,
        Command::ReadContents { ids } => read_contents(&path, ids).await?,
        Command::React {
            peer,
            msg_id,
            emoji,
        } => react(&path, &peer, msg_id, emoji.as_deref().unwrap_or_default()).await?,
        Command::ReadReactions { peer } => read_reactions(&path, &peer).await?,
        Command::Clear {
            with,
            just_clear,
            revoke,
            max_id,
        } => clear(&path, &with, just_clear, revoke, max_id).await?,
        Command::Typing { to, action } => {
            let c = DeviceClient::open(&path).await?;
            let peer = input_peer(&c.client, &to).await?;
            c.client.set_typing(peer, action).await?;
            println!("told");
        }
        Command::Status { presence } => {
            let c = DeviceClient::open(&path).await?;
            c.client.update_status(presence == "offline").await?;
            println!("you are {presence}");
        }
        Command::Watch { count, timeout } => watch(&path, count, timeout).await?,
        Command::Difference => difference(&path).await?,
        Command::History {
            with,
            limit,
            offset_id,
        } => {
            let c = DeviceClient::open(&path).await?;
            let peer = resolve(&c.client, &with).await?;
            let page = c
                .client
                .get_history(GetHistoryRequest {
                    peer: Some(InputPeer::user(peer)),
                    offset_id,
                    limit,
                    ..Default::default()
                })
                .await?;
            for m in &page.messages {
                println!("{}", show(m));
            }
        }
        Command::Search {
            q,
            with,
            from,
            limit,
            offset_id,
        } => search(&path, q, with, from, limit, offset_id).await?,
        Command::Dialogs {
            limit,
            folder,
            filter,
        } => dialogs(&path, limit, folder, filter).await?,
        Command::Pin(args) => settings::pin(&path, args).await?,
        Command::Archive(args) => settings::archive(&path, args).await?,
        Command::Mute(args) => settings::mute(&path, args).await?,
        Command::Draft(args) => settings::draft(&path, args).await?,
        Command::Folder { command } => settings::folder(&path, command).await?,
        Command::Contacts(command) => people::contacts(&path, command).await?,
        Command::Username(command) => people::username(&path, command).await?,
        Command::Privacy(command) => people::privacy(&path, command).await?,
    }
    Ok(())
}

/// Prints one page of a search, and the key of the next page when there is one.
async fn search(
    path: &std::path::Path,
    q: String,
    with: Option<String>,
    from: Option<String>,
    limit: i32,
    offset_id: i64,
) -> anyhow::Result<()> {
    let c = DeviceClient::open(path).await?;
    // No peer searches every dialog.
    let peer = match with {
        Some(with) => Some(InputPeer::user(resolve(&c.client, &with).await?)),
        None => None,
    };
    let from_user_id = match from {
        Some(from) => resolve(&c.client, &from).await?,
        None => 0,
    };
    let found = c
        .client
        .messages()
        .search(SearchRequest {
            peer,
            q,
            from_user_id,
            offset_id,
            limit,
            ..Default::default()
        })
        .await?
        .into_inner();
    for m in &found.messages {
        println!("{}", show(m));
    }
    if found.next_offset_id != 0 {
        println!("more: --offset-id {}", found.next_offset_id);
    }
    Ok(())
}

/// Sends a message to `to`; applies the device's own update when it continues the device's
/// state.
async fn send(path: &std::path::Path, to: &str, request: SendMessageRequest) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let peer = resolve(&c.client, to).await?;
    let sent = c
        .client
        .send_message(SendMessageRequest {
            peer: Some(InputPeer::user(peer)),
            ..request
        })
        .await?;
    let m = sent.message.as_ref().context("no message in the answer")?;
    println!(
        "sent {} (random_id {}, pts {})",
        show(m),
        sent.random_id,
        sent.pts
    );
    c.apply_own(path, sent_update(sent))
}

/// Edits a message; applies the device's own update when it continues the device's state.
async fn edit(
    path: &std::path::Path,
    with: &str,
    id: i64,
    text: String,
    entities: Vec<MessageEntity>,
) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let peer = resolve(&c.client, with).await?;
    let edited = c
        .client
        .edit_message(EditMessageRequest {
            peer: Some(InputPeer::user(peer)),
            id,
            text,
            entities,
            ..Default::default()
        })
        .await?;
    let m = edited
        .message
        .as_ref()
        .context("no message in the answer")?;
    println!("edited {} (pts {})", show(m), edited.pts);
    c.apply_own(path, edited_update(edited))
}

/// Forwards messages; applies the device's own updates, in order, while they continue the
/// device's state.
async fn forward(
    path: &std::path::Path,
    from: &str,
    ids: Vec<i64>,
    to: &str,
    drop_author: bool,
) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let from_peer = input_peer(&c.client, from).await?;
    let to_peer = input_peer(&c.client, to).await?;
    let random_ids = ids
        .iter()
        .map(|_| rand::random_range(1..i64::MAX))
        .collect();
    let forwarded = c
        .client
        .forward_messages(ForwardMessagesRequest {
            from_peer: Some(from_peer),
            ids,
            random_ids,
            to_peer: Some(to_peer),
            drop_author,
            ..Default::default()
        })
        .await?;
    for sent in forwarded.sent {
        let m = sent.message.as_ref().context("no message in the answer")?;
        println!("forwarded {} (pts {})", show(m), sent.pts);
        c.apply_own(path, sent_update(sent))?;
    }
    Ok(())
}

/// Deletes messages; applies the device's own update when it continues the device's state
/// and names every id (otherwise the next difference brings it).
async fn delete(path: &std::path::Path, ids: Vec<i64>, revoke: bool) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let deleted = c
        .client
        .delete_messages(DeleteMessagesRequest {
            ids: ids.clone(),
            revoke,
        })
        .await?;
    println!(
        "deleted {} message(s) (pts {})",
        deleted.pts_count, deleted.pts
    );
    c.apply_own(path, deleted_update(&ids, deleted))
}

async fn read_contents(path: &std::path::Path, ids: Vec<i64>) -> anyhow::Result<()> {
    let c = DeviceClient::open(path).await?;
    let read = c.client.read_message_contents(ids).await?;
    if read.pts_count == 0 {
        println!("nothing was unplayed (pts {})", read.pts);
    } else {
        println!("marked played (pts {})", read.pts);
    }
    Ok(())
}

async fn react(path: &std::path::Path, peer: &str, msg_id: i64, emoji: &str) -> anyhow::Result<()> {
    let c = DeviceClient::open(path).await?;
    let peer = input_peer(&c.client, peer).await?;
    let sent = c.client.send_reaction(peer, msg_id, emoji).await?;
    match (sent.pts_count, emoji) {
        (0, _) => println!("unchanged (pts {})", sent.pts),
        (_, "") => println!("reaction removed (pts {})", sent.pts),
        _ => println!("reacted {emoji} (pts {})", sent.pts),
    }
    Ok(())
}

async fn read_reactions(path: &std::path::Path, peer: &str) -> anyhow::Result<()> {
    let c = DeviceClient::open(path).await?;
    let peer = input_peer(&c.client, peer).await?;
    let read = c.client.read_reactions(peer).await?;
    match read.pts_count {
        0 => println!("no unread reactions (pts {})", read.pts),
        _ => println!("reactions read (pts {})", read.pts),
    }
    Ok(())
}

/// Reactions as a suffix of a message's line (`[👍 2, ❤ 1*]`, `*` yours); none: empty.
fn show_reactions(reactions: &[ReactionCount]) -> String {
    if reactions.is_empty() {
        return String::new();
    }
    let each: Vec<String> = reactions
        .iter()
        .map(|r| {
            let mine = if r.chosen_by_me { "*" } else { "" };
            format!("{} {}{mine}", r.reaction, r.count)
        })
        .collect();
    format!(" [{}]", each.join(", "))
}

/// Clears a dialog batch after batch while the answer says more is left. The device's own
/// updates come by its next difference.
async fn clear(
    path: &std::path::Path,
    with: &str,
    just_clear: bool,
    revoke: bool,
    max_id: i64,
) -> anyhow::Result<()> {
    let c = DeviceClient::open(path).await?;
    let peer = resolve(&c.client, with).await?;
    let mut total = 0i64;
    loop {
        let batch = c
            .client
            .delete_history(DeleteHistoryRequest {
                peer: Some(InputPeer::user(peer)),
                max_id,
                just_clear,
                revoke,
            })
            .await?;
        total += i64::from(batch.pts_count);
        println!("deleted {} message(s) (pts {})", batch.pts_count, batch.pts);
        if batch.offset <= 0 {
            break;
        }
    }
    println!("cleared {total} message(s) of the dialog with {peer}");
    Ok(())
}

/// Fetches and applies everything after the device's pts.
async fn difference(path: &std::path::Path) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let mut seq = Sequencer::new(c.state());
    let mut applied = 0usize;
    let outcome = c
        .client
        .catch_up(&mut seq, |u, _| {
            println!("{}", show_update(&u));
            applied += 1;
        })
        .await;
    c.device.pts = seq.state().pts;
    c.device.save(path)?;
    if let oxigram_client::CatchUp::TooLong { pts } = outcome? {
        println!("difference too long: reload dialogs and history; continuing from pts {pts}");
    }
    println!("applied {applied} updates, now at pts {}", c.device.pts);
    Ok(())
}

async fn dialogs(
    path: &std::path::Path,
    limit: i32,
    folder_id: i32,
    filter_id: i32,
) -> anyhow::Result<()> {
    let c = DeviceClient::open(path).await?;
    let page = c
        .client
        .get_dialogs(GetDialogsRequest {
            limit,
            folder_id,
            filter_id,
            ..Default::default()
        })
        .await?;
    println!("{} dialog(s) in all", page.count);
    for d in &page.dialogs {
        let name = page
            .users
            .iter()
            .find(|u| u.id == d.peer_user())
            .map_or("?".to_owned(), |u| u.first_name.clone());
        let top = page
            .messages
            .iter()
            .find(|m| m.id == d.top_message_id)
            .map_or(String::new(), |m| m.text.clone());
        let mut marks = Vec::new();
        if d.pinned {
            marks.push("pinned".to_owned());
        }
        if d.unread_mark {
            marks.push("marked unread".to_owned());
        }
        if let Some(n) = d
            .notify_settings
            .filter(|n| n.mute_until > chrono::Utc::now().timestamp())
        {
            marks.push(format!("muted until {}", n.mute_until));
        }
        if let Some(draft) = &d.draft {
            marks.push(format!("draft {:?}", draft.text));
        }
        let marks = if marks.is_empty() {
            String::new()
        } else {
            format!(" [{}]", marks.join(", "))
        };
        println!(
            "peer {} ({name}): top #{} {top:?}, unread {}, read inbox ≤ #{}, read outbox ≤ #{}{marks}",
            d.peer_user(),
            d.top_message_id,
            d.unread_count,
            d.read_inbox_max_id,
            d.read_outbox_max_id
        );
    }
    Ok(())
}

/// Streams updates from the device's pts, saving its pts after each; stops after `count`
/// updates or `timeout` seconds, else runs until Ctrl-C.
async fn watch(
    path: &std::path::Path,
    count: Option<usize>,
    timeout: Option<u64>,
) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let deadline = timeout.map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
    let state = c.state();
    let options = StreamOptions {
        // A CLI has no reason to wait for a late push: the difference comes at once.
        gap_wait: Duration::ZERO,
        ..StreamOptions::default()
    };
    let mut updates = UpdateStream::open(c.client.clone(), state, options).await?;
    println!("watching from pts {}", c.device.pts);
    let mut applied = 0usize;
    while count.is_none_or(|n| applied < n) {
        let event = match deadline {
            Some(d) => match tokio::time::timeout_at(d, updates.next()).await {
                Ok(event) => event,
                Err(_) => break,
            },
            None => updates.next().await,
        };
        match event {
            Event::Update(a) => {
                println!("{}", show_update(&a.update));
                applied += 1;
            }
            Event::Gap { local, received } => {
                eprintln!("gap: have pts {local}, got {received}; fetching the difference");
            }
            Event::TooLong { pts } => println!(
                "difference too long: reload dialogs and history; continuing from pts {pts}"
            ),
            Event::Resumed { pts } => eprintln!("stream reopened at pts {pts}"),
            Event::Paced { retry_in } => eprintln!(
                "the gateway is busy catching devices up; reopening in {} ms",
                retry_in.as_millis()
            ),
            Event::Failed { during, error } => eprintln!("{during:?} failed: {error}"),
            Event::Typing(t) => {
                println!("{}", presence::show_typing(&t, tokio::time::Instant::now()))
            }
            Event::Status(s) => println!("{}", presence::show_status(&s)),
            Event::User(u) => println!("profile changed: {}", people::show_user(&u)),
        }
        if updates.state().pts != c.device.pts {
            c.device.pts = updates.state().pts;
            c.device.save(path)?;
        }
    }
    println!("stopped at pts {}", c.device.pts);
    Ok(())
}

/// A peer named by phone, `@username`, id, or `me` (the user herself: Saved Messages).
async fn input_peer(c: &Client, who: &str) -> anyhow::Result<InputPeer> {
    Ok(match who {
        "me" => InputPeer::me(),
        who => InputPeer::user(resolve(c, who).await?),
    })
}

/// A user id from a phone number (`+…`), a username (`@…`) or a plain id.
async fn resolve(c: &Client, who: &str) -> anyhow::Result<i64> {
    if let Some(phone) = who.strip_prefix('+') {
        return Ok(c.resolve_phone(phone).await?.id);
    }
    if who.starts_with('@') {
        return people::resolve_username(c, who).await;
    }
    who.parse()
        .context("name a user by id, +phone or @username")
}

#[cfg(test)]
mod tests {
    use oxigram_proto::types::v1::{MessageFwdHeader, Peer};

    use super::*;

    #[test]
    fn a_forward_shows_its_header() {
        let mut m = Message {
            id: 3,
            peer_id: Some(oxigram_proto::types::v1::Peer::user(1)),
            from_user_id: 1,
            out: true,
            text: "pass it on".into(),
            ..Default::default()
        };
        assert_eq!(show(&m), "#3 → peer 1 from 1: pass it on");
        m.fwd_from = Some(MessageFwdHeader {
            from_user_id: 7,
            date: 1000,
            msg_id: 5,
            saved_from_peer: Some(Peer::user(2)),
            saved_from_msg_id: 9,
        });
        assert_eq!(
            show(&m),
            "#3 → peer 1 from 1 [forwarded from 7 #5 of 1000, saved from peer 2 #9]: pass it on"
        );
    }
}
