//! The dialog settings commands: pin, archive, mute, draft and folder (dialog filters). Each
//! change prints the update that logged it and moves the device's pts past it when it follows
//! on from the device's own.

use std::path::Path;

use anyhow::Context;
use clap::{Args, Subcommand};
use oxigram_client::Client;
use oxigram_proto::{
    dialog_rules::{FOLDER_ARCHIVE, FOLDER_MAIN, MUTE_FOREVER},
    types::v1::{DialogFilter, InputPeer, Peer, PeerNotifySettings, PtsUpdate, SaveDraftRequest},
};

use crate::{device::DeviceClient, resolve, show_update};

#[derive(Args)]
pub struct PinArgs {
    /// The dialog to pin (phone with +, or user id).
    #[arg(long, conflicts_with = "order")]
    with: Option<String>,
    /// Unpin it instead.
    #[arg(long)]
    off: bool,
    /// Sets the order of the folder's pinned dialogs instead (comma-separated).
    #[arg(long, value_delimiter = ',')]
    order: Vec<String>,
    /// The folder of --order: 0 the main list, 1 the archive.
    #[arg(long, default_value_t = FOLDER_MAIN)]
    folder: i32,
    /// With --order: unpin the folder's pinned dialogs it leaves out.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
pub struct ArchiveArgs {
    /// The dialogs to archive (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    with: Vec<String>,
    /// Move them back to the main list instead.
    #[arg(long)]
    undo: bool,
}

#[derive(Args)]
pub struct MuteArgs {
    #[arg(long)]
    with: String,
    /// Muted for this many seconds (default: for good).
    #[arg(long, conflicts_with = "off")]
    seconds: Option<i64>,
    /// Unmute.
    #[arg(long)]
    off: bool,
    /// Notify without sound.
    #[arg(long)]
    silent: bool,
}

#[derive(Args)]
pub struct DraftArgs {
    #[arg(long)]
    with: String,
    /// The draft's text; none (and no --reply-to) clears the draft.
    #[arg(long, default_value = "")]
    text: String,
    #[arg(long, default_value_t = 0)]
    reply_to: i64,
}

#[derive(Subcommand)]
pub enum FolderCommand {
    /// The account's dialog filters, in order.
    List,
    /// Makes or edits a dialog filter.
    Set {
        /// 2 to 255.
        #[arg(long)]
        id: i32,
        #[arg(long)]
        title: String,
        #[arg(long, default_value = "")]
        emoticon: String,
        #[arg(long)]
        contacts: bool,
        #[arg(long)]
        non_contacts: bool,
        #[arg(long)]
        exclude_muted: bool,
        #[arg(long)]
        exclude_read: bool,
        #[arg(long)]
        exclude_archived: bool,
        /// Users listed first, in this order (comma-separated).
        #[arg(long, value_delimiter = ',')]
        pinned: Vec<String>,
        #[arg(long, value_delimiter = ',')]
        include: Vec<String>,
        #[arg(long, value_delimiter = ',')]
        exclude: Vec<String>,
    },
    /// Deletes a dialog filter.
    Delete {
        #[arg(long)]
        id: i32,
    },
    /// Orders the dialog filters (every id, comma-separated).
    Order {
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<i32>,
    },
}

/// Prints a change's update and applies it to the device's state when it follows on.
fn logged(c: &mut DeviceClient, path: &Path, update: PtsUpdate) -> anyhow::Result<()> {
    if update.pts == 0 {
        println!("logged (its pts comes with the next difference)");
        return Ok(());
    }
    println!("{}", show_update(&update));
    c.apply_own(path, Some(update))
}

async fn peer(c: &Client, who: &str) -> anyhow::Result<InputPeer> {
    Ok(InputPeer::user(resolve(c, who).await?))
}

async fn peers(c: &Client, who: &[String]) -> anyhow::Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(who.len());
    for w in who {
        ids.push(resolve(c, w).await?);
    }
    Ok(ids)
}

pub async fn pin(path: &Path, args: PinArgs) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let update = match &args.with {
        Some(with) => {
            let p = peer(&c.client, with).await?;
            c.client.toggle_dialog_pin(p, !args.off).await?
        }
        None => {
            let order = peers(&c.client, &args.order).await?;
            let order = order.into_iter().map(InputPeer::user).collect();
            c.client
                .reorder_pinned_dialogs(args.folder, order, args.force)
                .await?
        }
    };
    logged(&mut c, path, update)
}

pub async fn archive(path: &Path, args: ArchiveArgs) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let folder = if args.undo {
        FOLDER_MAIN
    } else {
        FOLDER_ARCHIVE
    };
    let moves = peers(&c.client, &args.with)
        .await?
        .into_iter()
        .map(|p| (InputPeer::user(p), folder))
        .collect();
    let update = c.client.edit_peer_folders(moves).await?;
    logged(&mut c, path, update)
}

pub async fn mute(path: &Path, args: MuteArgs) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let p = peer(&c.client, &args.with).await?;
    let mute_until = match (args.off, args.seconds) {
        (true, _) => 0,
        (false, Some(s)) => (chrono::Utc::now().timestamp() + s).min(MUTE_FOREVER),
        (false, None) => MUTE_FOREVER,
    };
    let settings = PeerNotifySettings {
        mute_until,
        silent: args.silent.then_some(true),
        ..Default::default()
    };
    let update = c.client.update_notify_settings(p, settings).await?;
    logged(&mut c, path, update)
}

pub async fn draft(path: &Path, args: DraftArgs) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let p = peer(&c.client, &args.with).await?;
    let update = c
        .client
        .save_draft(SaveDraftRequest {
            peer: Some(p),
            text: args.text,
            entities: Vec::new(),
            reply_to_msg_id: args.reply_to,
        })
        .await?;
    logged(&mut c, path, update)
}

/// A filter as one line.
pub fn show_filter(f: &DialogFilter) -> String {
    let ids = |peers: &[Peer]| -> String {
        let ids: Vec<String> = peers
            .iter()
            .filter_map(Peer::user_id)
            .map(|id| id.to_string())
            .collect();
        ids.join(",")
    };
    let flags: Vec<&str> = [
        (f.contacts, "contacts"),
        (f.non_contacts, "non-contacts"),
        (f.exclude_muted, "no muted"),
        (f.exclude_read, "no read"),
        (f.exclude_archived, "no archived"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    // No emoticon: no gap where it would be.
    let emoticon = if f.emoticon.is_empty() {
        String::new()
    } else {
        format!(" {}", f.emoticon)
    };
    format!(
        "filter {} {:?}{} [{}] pinned [{}] include [{}] exclude [{}]",
        f.id,
        f.title,
        emoticon,
        flags.join(", "),
        ids(&f.pinned_peers),
        ids(&f.include_peers),
        ids(&f.exclude_peers)
    )
}

pub async fn folder(path: &Path, command: FolderCommand) -> anyhow::Result<()> {
    let mut c = DeviceClient::open(path).await?;
    let update = match command {
        FolderCommand::List => {
            for f in c.client.get_dialog_filters().await? {
                println!("{}", show_filter(&f));
            }
            return Ok(());
        }
        FolderCommand::Set {
            id,
            title,
            emoticon,
            contacts,
            non_contacts,
            exclude_muted,
            exclude_read,
            exclude_archived,
            pinned,
            include,
            exclude,
        } => {
            let as_peers = |ids: Vec<i64>| ids.into_iter().map(Peer::user).collect();
            let filter = DialogFilter {
                id,
                title,
                emoticon,
                contacts,
                non_contacts,
                exclude_muted,
                exclude_read,
                exclude_archived,
                pinned_peers: as_peers(peers(&c.client, &pinned).await?),
                include_peers: as_peers(peers(&c.client, &include).await?),
                exclude_peers: as_peers(peers(&c.client, &exclude).await?),
            };
            c.client.update_dialog_filter(id, Some(filter)).await?
        }
        FolderCommand::Delete { id } => c.client.update_dialog_filter(id, None).await?,
        FolderCommand::Order { ids } => c
            .client
            .update_dialog_filters_order(ids)
            .await
            .context("order")?,
    };
    logged(&mut c, path, update)
}
