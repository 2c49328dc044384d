//! Dialog settings across devices: one user's three devices pin, reorder, archive, mark
//! unread, read, mute, save drafts, hide the peer settings bar, send and keep dialog filters,
//! drawn from a fixed seed, while their streams are cut and reopened and offline devices catch
//! up by getDifference (or reload after `too_long`). Each device keeps its account with the client library
//! (`oxigram_client::Mirror`), built only from the updates it applies; at the end every
//! device's copy equals what the server answers (`GetDialogs` of both folders, paged, and
//! `GetDialogFilters`). Beside it: the refusals of every settings call as a table, the page
//! hash and count (of a folder and of a filter), `GetPeerDialogs`, the most pinned dialogs of a
//! folder, the draft (replying to a message of its dialog) a send clears on the other devices,
//! the unread mark a read takes away, and the peer settings bar.

use std::{
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use anyhow::Context;
use oxigram_client::{
    CatchUp, Client, Event, Mirror, SentUpdates, Sequencer, State, StreamOptions, UpdateStream,
};
use oxigram_proto::{
    api::v1::{GetDialogsRequest, SendMessageRequest},
    dialog_rules::{MAX_PINNED_DIALOGS, MUTE_FOREVER},
    types::v1::{
        Dialog, DialogFilter, InputPeer, MessageEntity, Peer, PeerNotifySettings, PtsUpdate,
        SaveDraftRequest, message_entity, update,
    },
};
use oxigram_tests::{Mode, System, TestClient, eventually};
use rand::{Rng, SeedableRng, rngs::StdRng};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const SEED: u64 = 0xd1a1_0957;
const OPERATIONS: usize = 160;
const DEVICES: usize = 3;
/// Updates the log keeps per user: small, so an offline device meets `too_long`.
const RETAIN: u32 = 40;

fn code(e: &oxigram_client::Error) -> String {
    e.code().to_owned()
}

fn lock(local: &Mutex<Local>) -> MutexGuard<'_, Local> {
    local.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a device knows, from its updates alone.
#[derive(Default)]
struct Local {
    mirror: Mirror,
    /// Copies rebuilt after `too_long`.
    reloads: u32,
}

struct Online {
    stop: CancellationToken,
    sent: SentUpdates,
    task: JoinHandle<anyhow::Result<State>>,
}

struct Device {
    client: TestClient,
    local: Arc<Mutex<Local>>,
    saved: State,
    online: Option<Online>,
}

async fn follow(
    mut stream: UpdateStream,
    local: Arc<Mutex<Local>>,
    stop: CancellationToken,
) -> anyhow::Result<State> {
    loop {
        let event = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            event = stream.next() => event,
        };
        if let Event::Failed { during, error } = &event {
            anyhow::bail!("the update stream failed ({during:?}): {error}");
        }
        // A `TooLong` marks the copy stale; it is rebuilt when the device goes offline.
        lock(&local).mirror.follow(&event);
    }
    Ok(stream.state())
}

impl Device {
    fn new(client: TestClient) -> Self {
        Self {
            client,
            local: Arc::default(),
            saved: State::default(),
            online: None,
        }
    }

    async fn go_online(&mut self) -> anyhow::Result<()> {
        if self.online.is_some() {
            return Ok(());
        }
        self.catch_up().await?;
        let options = StreamOptions {
            gap_wait: Duration::from_millis(300),
            max_reconnects: Some(0),
            ..StreamOptions::default()
        };
        let stream = UpdateStream::open(Client::clone(&self.client), self.saved, options).await?;
        let stop = CancellationToken::new();
        let sent = stream.sent();
        let task = tokio::spawn(follow(stream, self.local.clone(), stop.clone()));
        self.online = Some(Online { stop, sent, task });
        Ok(())
    }

    async fn go_offline(&mut self) -> anyhow::Result<()> {
        let Some(online) = self.online.take() else {
            return Ok(());
        };
        online.stop.cancel();
        self.saved = online.task.await??;
        if lock(&self.local).mirror.is_stale() {
            self.reload().await?;
        }
        Ok(())
    }

    async fn reload(&mut self) -> anyhow::Result<()> {
        let mirror = Mirror::load(&self.client).await?;
        let mut local = lock(&self.local);
        local.mirror = mirror;
        local.reloads += 1;
        Ok(())
    }

    /// getDifference from the saved state into the copy; after `too_long`, a reload.
    async fn catch_up(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.online.is_none(), "catching up beside a live stream");
        let mut seq = Sequencer::new(self.saved);
        let local = &self.local;
        let outcome = self
            .client
            .catch_up(&mut seq, |u, _| lock(local).mirror.apply(&u))
            .await?;
        self.saved = seq.state();
        if let CatchUp::TooLong { .. } = outcome {
            self.reload().await?;
        }
        Ok(())
    }

    /// A settings call's answer: the device's own update, applied in order when online.
    fn answered(&self, update: PtsUpdate) {
        if let Some(online) = &self.online {
            online.sent.answer_setting(update);
        }
    }
}

/// A folder's dialogs as the server pages them, `limit` a page.
async fn server_folder(c: &Client, folder_id: i32, limit: i32) -> anyhow::Result<Vec<Dialog>> {
    server_list(c, folder_id, limit, false).await
}

/// A folder's dialogs as the server pages them, with `include_empty` as given.
async fn server_list(
    c: &Client,
    folder_id: i32,
    limit: i32,
    include_empty: bool,
) -> anyhow::Result<Vec<Dialog>> {
    let mut dialogs = Vec::new();
    let mut request = GetDialogsRequest {
        limit,
        folder_id,
        include_empty,
        ..GetDialogsRequest::default()
    };
    loop {
        let page = c.get_dialogs(request).await?;
        anyhow::ensure!(!page.not_modified, "no hash was sent");
        let Some(last) = page.dialogs.last() else {
            break;
        };
        request = GetDialogsRequest {
            offset_date: last.top_message_date,
            offset_id: last.top_message_id,
            offset_peer: last.peer,
            offset_pinned: last.pinned,
            limit,
            folder_id,
            include_empty,
            ..GetDialogsRequest::default()
        };
        dialogs.extend(page.dialogs);
    }
    Ok(dialogs)
}

/// Whether every device's copy is the server's: both folders (paged by two, so the seek
/// crosses the pinned dialogs) and the filters; with `strict`, asserts it.
async fn converged(devices: &[Device], strict: bool) -> anyhow::Result<bool> {
    let c = &devices[0].client;
    let main = server_folder(c, 0, 2).await?;
    let archive = server_folder(c, 1, 2).await?;
    let filters = c.get_dialog_filters().await?;
    for (i, d) in devices.iter().enumerate() {
        let local = lock(&d.local);
        let same = local.mirror.dialogs_in(0) == main
            && local.mirror.dialogs_in(1) == archive
            && local.mirror.filters() == filters;
        if strict {
            assert_eq!(
                local.mirror.dialogs_in(0),
                main,
                "device {i}: the main list"
            );
            assert_eq!(
                local.mirror.dialogs_in(1),
                archive,
                "device {i}: the archive"
            );
            assert_eq!(local.mirror.filters(), filters, "device {i}: the filters");
        }
        if !same {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Waits until `c`'s main list holds `n` dialogs (the projection applies a send just after it
/// answers).
async fn wait_dialogs(c: &Client, n: usize) -> anyhow::Result<()> {
    eventually(Duration::from_secs(10), "the dialogs", || async {
        Ok((server_folder(c, 0, 100).await?.len() == n).then_some(()))
    })
    .await
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Pin {
        device: usize,
        peer: usize,
        pinned: bool,
    },
    Reorder {
        device: usize,
        folder: i32,
        force: bool,
    },
    Archive {
        device: usize,
        peer: usize,
        archived: bool,
    },
    Mark {
        device: usize,
        peer: usize,
        unread: bool,
    },
    Read {
        device: usize,
        peer: usize,
    },
    Mute {
        device: usize,
        peer: usize,
        until: i64,
    },
    Draft {
        device: usize,
        peer: usize,
        clear: bool,
    },
    Send {
        device: usize,
        peer: usize,
    },
    /// A peer writes to the user.
    Incoming {
        peer: usize,
    },
    Filter {
        device: usize,
        id: i32,
        pick: u32,
    },
    DeleteFilter {
        device: usize,
        id: i32,
    },
    OrderFilters {
        device: usize,
    },
    HideBar {
        device: usize,
        peer: usize,
    },
    Toggle {
        device: usize,
    },
}

fn draw(rng: &mut StdRng, peers: usize) -> Op {
    let device = rng.random_range(0..DEVICES);
    let peer = rng.random_range(0..peers);
    match rng.random_range(0..100) {
        0..12 => Op::Pin {
            device,
            peer,
            pinned: rng.random_bool(0.7),
        },
        12..17 => Op::Reorder {
            device,
            folder: i32::from(rng.random_bool(0.3)),
            force: rng.random_bool(0.3),
        },
        17..25 => Op::Archive {
            device,
            peer,
            archived: rng.random_bool(0.5),
        },
        25..33 => Op::Mark {
            device,
            peer,
            unread: rng.random_bool(0.7),
        },
        33..38 => Op::Read { device, peer },
        38..45 => Op::Mute {
            device,
            peer,
            until: [0, MUTE_FOREVER, 4_000_000_000 % MUTE_FOREVER][rng.random_range(0..3)],
        },
        45..55 => Op::Draft {
            device,
            peer,
            clear: rng.random_bool(0.2),
        },
        55..62 => Op::Send { device, peer },
        62..68 => Op::Incoming { peer },
        68..76 => Op::Filter {
            device,
            id: rng.random_range(2..6),
            pick: rng.random(),
        },
        76..80 => Op::DeleteFilter {
            device,
            id: rng.random_range(2..6),
        },
        80..84 => Op::OrderFilters { device },
        84..87 => Op::HideBar { device, peer },
        _ => Op::Toggle { device },
    }
}

struct Run {
    devices: Vec<Device>,
    /// The peers' devices and user ids.
    peers: Vec<(TestClient, i64)>,
    /// The id, in the user's box, of each peer's first message to her: what her drafts reply
    /// to.
    hellos: Vec<i64>,
    random_id: i64,
    /// Operations the server refused as it should (a filter to delete that is gone, …).
    refused: u32,
    /// Drafts saved with a reply.
    replying_drafts: u32,
}

impl Run {
    fn peer(&self, i: usize) -> InputPeer {
        InputPeer::user(self.peers[i].1)
    }

    async fn run(&mut self, op: Op) -> anyhow::Result<()> {
        let answer = match op {
            Op::Pin {
                device,
                peer,
                pinned,
            } => {
                let d = &self.devices[device];
                d.client.toggle_dialog_pin(self.peer(peer), pinned).await
            }
            Op::Reorder {
                device,
                folder,
                force,
            } => {
                let d = &self.devices[device];
                // The server's pinned dialogs, reversed, and with force one of them left out.
                let mut pinned: Vec<InputPeer> = server_folder(&d.client, folder, 100)
                    .await?
                    .iter()
                    .filter(|dialog| dialog.pinned)
                    .map(|dialog| InputPeer::user(dialog.peer_user()))
                    .rev()
                    .collect();
                if force {
                    pinned.pop();
                }
                d.client.reorder_pinned_dialogs(folder, pinned, force).await
            }
            Op::Archive {
                device,
                peer,
                archived,
            } => {
                let d = &self.devices[device];
                let folder = i32::from(archived);
                d.client
                    .edit_peer_folders(vec![(self.peer(peer), folder)])
                    .await
            }
            Op::Mark {
                device,
                peer,
                unread,
            } => {
                let d = &self.devices[device];
                d.client.mark_dialog_unread(self.peer(peer), unread).await
            }
            Op::Read { device, peer } => {
                // Its update reaches the device by getDifference (a gap, or its next catch-up).
                let d = &self.devices[device];
                d.client.read_history(self.peer(peer), 0).await?;
                return Ok(());
            }
            Op::Mute {
                device,
                peer,
                until,
            } => {
                let d = &self.devices[device];
                let settings = PeerNotifySettings {
                    mute_until: until,
                    silent: (until > 0).then_some(true),
                    ..Default::default()
                };
                d.client
                    .update_notify_settings(self.peer(peer), settings)
                    .await
            }
            Op::Draft {
                device,
                peer,
                clear,
            } => {
                let d = &self.devices[device];
                let text = if clear {
                    String::new()
                } else {
                    format!("draft {}", self.random_id)
                };
                // Every other draft replies to a message of its dialog.
                let reply_to_msg_id = if !clear && self.random_id % 2 == 0 {
                    self.hellos[peer]
                } else {
                    0
                };
                self.random_id += 1;
                self.replying_drafts += u32::from(reply_to_msg_id > 0);
                d.client
                    .save_draft(SaveDraftRequest {
                        peer: Some(self.peer(peer)),
                        entities: if clear {
                            Vec::new()
                        } else {
                            vec![MessageEntity {
                                kind: message_entity::Kind::Bold.into(),
                                offset: 0,
                                length: 5,
                                ..Default::default()
                            }]
                        },
                        text,
                        reply_to_msg_id,
                    })
                    .await
            }
            Op::Send { device, peer } => {
                self.random_id += 1;
                let d = &self.devices[device];
                let sent = d
                    .client
                    .send_message(SendMessageRequest {
                        peer: Some(self.peer(peer)),
                        random_id: self.random_id,
                        text: "sent".into(),
                        ..Default::default()
                    })
                    .await?;
                if let Some(online) = &d.online {
                    online.sent.answer(sent);
                }
                return Ok(());
            }
            Op::Incoming { peer } => {
                self.random_id += 1;
                let me = self.devices[0].client.user_id()?;
                self.peers[peer].0.send(me, self.random_id, "hi").await?;
                return Ok(());
            }
            Op::Filter { device, id, pick } => {
                let d = &self.devices[device];
                let peers = |bits: u32| -> Vec<Peer> {
                    (0..self.peers.len())
                        .filter(|i| bits & (1 << i) != 0)
                        .map(|i| Peer::user(self.peers[i].1))
                        .collect()
                };
                let filter = DialogFilter {
                    id,
                    title: format!("f{id}-{}", pick % 100),
                    contacts: pick & 1 != 0,
                    non_contacts: pick & 1 != 0,
                    exclude_muted: pick & 2 != 0,
                    exclude_read: pick & 4 != 0,
                    exclude_archived: pick & 8 != 0,
                    pinned_peers: peers(pick >> 4 & 0b11),
                    include_peers: peers(pick >> 6 & 0b1100 | 1),
                    exclude_peers: peers(pick >> 8 & 0b10000),
                    ..Default::default()
                };
                d.client.update_dialog_filter(id, Some(filter)).await
            }
            Op::DeleteFilter { device, id } => {
                let d = &self.devices[device];
                d.client.update_dialog_filter(id, None).await
            }
            Op::OrderFilters { device } => {
                let d = &self.devices[device];
                let mut ids: Vec<i32> = d
                    .client
                    .get_dialog_filters()
                    .await?
                    .iter()
                    .map(|f| f.id)
                    .collect();
                ids.reverse();
                d.client.update_dialog_filters_order(ids).await
            }
            Op::HideBar { device, peer } => {
                let d = &self.devices[device];
                d.client.hide_peer_settings_bar(self.peer(peer)).await
            }
            Op::Toggle { device } => {
                let d = &mut self.devices[device];
                if d.online.is_some() {
                    d.go_offline().await?;
                } else {
                    d.go_online().await?;
                }
                return Ok(());
            }
        };
        let device = match op {
            Op::Pin { device, .. }
            | Op::Reorder { device, .. }
            | Op::Archive { device, .. }
            | Op::Mark { device, .. }
            | Op::Mute { device, .. }
            | Op::Draft { device, .. }
            | Op::Filter { device, .. }
            | Op::DeleteFilter { device, .. }
            | Op::OrderFilters { device }
            | Op::HideBar { device, .. } => device,
            _ => 0,
        };
        match answer {
            Ok(update) => {
                anyhow::ensure!(update.pts > 0, "{op:?}: not logged in time");
                self.devices[device].answered(update);
            }
            // A filter deleted twice: the second finds none.
            Err(e) if code(&e) == "FILTER_ID_INVALID" && matches!(op, Op::DeleteFilter { .. }) => {
                self.refused += 1;
            }
            Err(e) => return Err(e).with_context(|| format!("{op:?}")),
        }
        Ok(())
    }

    /// Every device stops, catches up (reloading after `too_long`), and holds the server's
    /// state.
    async fn settle(&mut self) -> anyhow::Result<()> {
        for d in &mut self.devices {
            d.go_offline().await?;
        }
        // What a send makes (its draft-cleared update) is logged a moment after the send.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            for d in &mut self.devices {
                d.catch_up().await?;
            }
            let last_try = tokio::time::Instant::now() >= deadline;
            if converged(&self.devices, last_try).await? {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn system() -> anyhow::Result<System> {
    let (mut config, dir) = System::config().await?;
    config.updates.retain_per_user = RETAIN;
    config.gateway.sends_per_minute = 10_000;
    System::start_with(config, dir, Mode::OneProcess).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_converge_on_three_devices_under_cut_streams_and_after_too_long()
-> anyhow::Result<()> {
    let system = system().await?;
    let (alice, me) = system
        .user_on_devices::<DEVICES>("15557001", "Alice")
        .await?;
    let mut peers = Vec::new();
    for (i, name) in ["Bob", "Carol", "Dave", "Erin", "Frank"].iter().enumerate() {
        let mut c = system.device().await?;
        let id = c.sign_up(&format!("1555710{i}"), name).await?.id;
        c.send(me, 1, "hello").await?;
        peers.push((c, id));
    }
    wait_dialogs(&alice[0], peers.len()).await?;
    let listed = server_folder(&alice[0], 0, 100).await?;
    let hellos = peers
        .iter()
        .map(|(_, id)| {
            let dialog = listed.iter().find(|d| d.peer_user() == *id);
            dialog
                .map(|d| d.top_message_id)
                .context("a dialog with each")
        })
        .collect::<anyhow::Result<Vec<i64>>>()?;
    let mut run = Run {
        devices: alice.into_iter().map(Device::new).collect(),
        peers,
        hellos,
        random_id: 100,
        refused: 0,
        replying_drafts: 0,
    };
    for d in &mut run.devices {
        d.go_online().await?;
    }
    let mut rng = StdRng::seed_from_u64(SEED);
    let ops: Vec<Op> = (0..OPERATIONS)
        .map(|_| draw(&mut rng, run.peers.len()))
        .collect();
    for (i, op) in ops.into_iter().enumerate() {
        run.run(op)
            .await
            .with_context(|| format!("operation {i}"))?;
    }
    run.settle().await?;
    let main = server_folder(&run.devices[0].client, 0, 100).await?;
    let archive = server_folder(&run.devices[0].client, 1, 100).await?;
    tracing::info!(
        main = main.len(),
        archive = archive.len(),
        pinned = main.iter().chain(&archive).filter(|d| d.pinned).count(),
        refused = run.refused,
        "settled"
    );
    // The run did something of each.
    assert!(main.iter().chain(&archive).any(|d| d.pinned));
    assert!(run.replying_drafts > 0, "no draft replied to a message");
    assert!(!archive.is_empty() || main.len() == run.peers.len());

    // Device 2 stays away while more than the log keeps happens, then catches up: too_long,
    // and a reload.
    let before = lock(&run.devices[2].local).reloads;
    for i in 0..(RETAIN as usize + 10) {
        let peer = i % run.peers.len();
        let op = match i % 5 {
            0 => Op::Pin {
                device: 0,
                peer,
                pinned: i % 8 == 0,
            },
            1 => Op::Mute {
                device: 1,
                peer,
                until: if i % 3 == 0 { 0 } else { MUTE_FOREVER },
            },
            2 => Op::Draft {
                device: 0,
                peer,
                clear: false,
            },
            3 => Op::Archive {
                device: 1,
                peer,
                archived: i % 3 == 0,
            },
            _ => Op::HideBar { device: 0, peer },
        };
        run.run(op).await?;
    }
    run.run(Op::Filter {
        device: 0,
        id: 9,
        pick: 0b10_0110,
    })
    .await?;
    run.settle().await?;
    assert!(
        lock(&run.devices[2].local).reloads > before,
        "device 2 met too_long and reloaded"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_after_too_long_restores_the_dialogs_without_messages() -> anyhow::Result<()> {
    let system = system().await?;
    let ([phone, tablet], me) = system.user_on_devices::<2>("15557801", "Alice").await?;
    let [bob, carol, erin] = system
        .users([
            ("15557802", "Bob"),
            ("15557803", "Carol"),
            ("15557804", "Erin"),
        ])
        .await?;
    let (b, c, e) = (bob.user_id()?, carol.user_id()?, erin.user_id()?);
    bob.send(me, 1, "hi").await?;
    wait_dialogs(&phone, 1).await?;
    let mut tablet = Device::new(tablet);
    tablet.catch_up().await?;

    // Settings of dialogs without a message: a draft and a hidden bar for Carol, a mute for
    // Erin; then more than the log keeps, so the tablet meets too_long.
    phone
        .save_draft(SaveDraftRequest {
            peer: Some(InputPeer::user(c)),
            text: "dear Carol".into(),
            ..Default::default()
        })
        .await?;
    phone.hide_peer_settings_bar(InputPeer::user(c)).await?;
    let muted = PeerNotifySettings {
        mute_until: MUTE_FOREVER,
        ..Default::default()
    };
    phone
        .update_notify_settings(InputPeer::user(e), muted)
        .await?;
    for i in 0..RETAIN + 5 {
        phone
            .mark_dialog_unread(InputPeer::user(b), i % 2 == 0)
            .await?;
    }

    // Without the flag the list holds Bob's dialog alone; with it, the empty ones follow,
    // paged one by one across them.
    let listed = server_folder(&phone, 0, 100).await?;
    assert_eq!(
        listed.iter().map(Dialog::peer_user).collect::<Vec<_>>(),
        [b]
    );
    let all = server_list(&phone, 0, 1, true).await?;
    let mut empty: Vec<i64> = all.iter().skip(1).map(Dialog::peer_user).collect();
    empty.sort_unstable();
    assert_eq!(all[0].peer_user(), b);
    assert_eq!(empty, [c, e]);
    assert_eq!(server_list(&phone, 0, 100, true).await?, all);

    tablet.catch_up().await?;
    let local = lock(&tablet.local);
    assert_eq!(local.reloads, 1, "the tablet met too_long and reloaded");
    for d in &all {
        let mine = local.mirror.dialog(d.peer_user()).map(|l| l.dialog());
        assert_eq!(mine.as_ref(), Some(d), "peer {}", d.peer_user());
    }
    let carol_dialog = local.mirror.dialog(c).context("Carol's dialog")?;
    assert_eq!(
        carol_dialog.draft.as_ref().map(|d| d.text.as_str()),
        Some("dear Carol")
    );
    assert!(carol_dialog.settings_bar_hidden);
    assert_eq!(
        local.mirror.dialog(e).map(|d| d.notify_settings),
        Some(muted)
    );
    Ok(())
}

async fn pinned_peers(c: &Client, folder: i32) -> anyhow::Result<Vec<i64>> {
    Ok(server_folder(c, folder, 100)
        .await?
        .iter()
        .filter(|d| d.pinned)
        .map(Dialog::peer_user)
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_order_folders_and_the_unread_mark_on_the_api() -> anyhow::Result<()> {
    let system = system().await?;
    let [alice, bob, carol, dave] = system
        .users([
            ("15557201", "Alice"),
            ("15557202", "Bob"),
            ("15557203", "Carol"),
            ("15557204", "Dave"),
        ])
        .await?;
    let me = alice.user_id()?;
    let (b, c, d) = (bob.user_id()?, carol.user_id()?, dave.user_id()?);
    for (i, peer) in [&bob, &carol, &dave].into_iter().enumerate() {
        peer.send(me, i as i64 + 1, "hi").await?;
    }
    wait_dialogs(&alice, 3).await?;
    alice.toggle_dialog_pin(InputPeer::user(b), true).await?;
    alice.toggle_dialog_pin(InputPeer::user(c), true).await?;
    assert_eq!(pinned_peers(&alice, 0).await?, [c, b]);
    alice
        .reorder_pinned_dialogs(0, vec![InputPeer::user(b), InputPeer::user(d)], false)
        .await?;
    assert_eq!(
        pinned_peers(&alice, 0).await?,
        [b, d, c],
        "the rest follows"
    );
    alice
        .reorder_pinned_dialogs(0, vec![InputPeer::user(d)], true)
        .await?;
    assert_eq!(pinned_peers(&alice, 0).await?, [d], "force unpins the rest");
    // The last word on a peer counts: moved there and back is no move, and keeps the pin.
    alice
        .edit_peer_folders(vec![(InputPeer::user(d), 1), (InputPeer::user(d), 0)])
        .await?;
    assert_eq!(pinned_peers(&alice, 0).await?, [d]);
    alice
        .edit_peer_folders(vec![(InputPeer::user(d), 1)])
        .await?;
    assert_eq!(pinned_peers(&alice, 0).await?, Vec::<i64>::new());
    let archive = server_folder(&alice, 1, 10).await?;
    assert_eq!(
        archive
            .iter()
            .map(|x| (x.peer_user(), x.pinned))
            .collect::<Vec<_>>(),
        [(d, false)],
        "archived, and unpinned"
    );
    // The unread mark: a read takes it away, also with nothing new to read.
    alice.read_history(InputPeer::user(b), 0).await?;
    alice.mark_dialog_unread(InputPeer::user(b), true).await?;
    let marked = |dialogs: Vec<Dialog>| dialogs.iter().any(|x| x.peer_user() == b && x.unread_mark);
    assert!(marked(server_folder(&alice, 0, 10).await?));
    let read = alice.read_history(InputPeer::user(b), 0).await?;
    assert_eq!(read.pts_count, 1, "the mark's removal is logged");
    assert!(!marked(server_folder(&alice, 0, 10).await?));
    // The notify settings read back.
    let muted = PeerNotifySettings {
        mute_until: MUTE_FOREVER,
        show_previews: Some(false),
        silent: None,
    };
    alice
        .update_notify_settings(InputPeer::user(c), muted)
        .await?;
    assert_eq!(alice.get_notify_settings(InputPeer::user(c)).await?, muted);
    assert_eq!(
        alice.get_notify_settings(InputPeer::user(b)).await?,
        PeerNotifySettings::default()
    );
    Ok(())
}

/// A folder pins at most `MAX_PINNED_DIALOGS` dialogs: on the client API the next pin is
/// refused with `PINNED_DIALOGS_TOO_MUCH` and logs nothing; pinning one pinned already, or
/// pinning in the other folder, is no pin too many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pin_past_the_most_a_folder_pins_is_refused_on_the_api() -> anyhow::Result<()> {
    use futures::{StreamExt, TryStreamExt, stream};
    let system = system().await?;
    let [alice] = system.users([("15557701", "Alice")]).await?;
    let me = alice.user_id()?;
    // One peer more than a folder pins, and one for the archive; each writes to her.
    let peers: Vec<i64> = stream::iter(0..MAX_PINNED_DIALOGS + 2)
        .map(|i| {
            let system = &system;
            async move {
                let mut peer = system.device().await?;
                let id = peer.sign_up(&format!("1555771{i:04}"), "Peer").await?.id;
                peer.send(me, 1, "hi").await?;
                anyhow::Ok(id)
            }
        })
        .buffered(8)
        .try_collect()
        .await?;
    wait_dialogs(&alice, peers.len()).await?;
    let (last, archived) = (peers[MAX_PINNED_DIALOGS], peers[MAX_PINNED_DIALOGS + 1]);
    alice
        .edit_peer_folders(vec![(InputPeer::user(archived), 1)])
        .await?;
    for peer in &peers[..MAX_PINNED_DIALOGS] {
        alice
            .toggle_dialog_pin(InputPeer::user(*peer), true)
            .await?;
    }
    assert_eq!(pinned_peers(&alice, 0).await?.len(), MAX_PINNED_DIALOGS);
    let before = alice.get_state().await?.pts;
    let refused = alice
        .toggle_dialog_pin(InputPeer::user(last), true)
        .await
        .map(|_| ())
        .map_err(|e| code(&e));
    assert_eq!(refused, Err("PINNED_DIALOGS_TOO_MUCH".to_owned()));
    assert_eq!(alice.get_state().await?.pts, before, "nothing logged");
    let pinned = pinned_peers(&alice, 0).await?;
    assert_eq!(pinned.len(), MAX_PINNED_DIALOGS);
    assert!(!pinned.contains(&last));
    // A pinned one again, and a pin in the archive.
    alice
        .toggle_dialog_pin(InputPeer::user(peers[0]), true)
        .await?;
    alice
        .toggle_dialog_pin(InputPeer::user(archived), true)
        .await?;
    assert_eq!(pinned_peers(&alice, 1).await?, [archived]);
    assert_eq!(pinned_peers(&alice, 0).await?.len(), MAX_PINNED_DIALOGS);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_hash_skips_an_unchanged_page_and_peer_dialogs_come_in_order() -> anyhow::Result<()>
{
    let system = system().await?;
    let [alice, bob, carol] = system
        .users([
            ("15557301", "Alice"),
            ("15557302", "Bob"),
            ("15557303", "Carol"),
        ])
        .await?;
    let me = alice.user_id()?;
    let (b, c) = (bob.user_id()?, carol.user_id()?);
    bob.send(me, 1, "hi").await?;
    carol.send(me, 1, "hi").await?;
    let first = eventually(Duration::from_secs(10), "both dialogs", || async {
        let page = alice
            .get_dialogs(GetDialogsRequest {
                limit: 1,
                ..Default::default()
            })
            .await?;
        Ok(Some(page).filter(|p| p.count == 2))
    })
    .await?;
    assert_eq!(first.dialogs.len(), 1);
    assert_eq!(first.hash, oxigram_proto::dialogs_hash(&first.dialogs));
    let again = alice
        .get_dialogs(GetDialogsRequest {
            limit: 1,
            hash: first.hash,
            ..Default::default()
        })
        .await?;
    assert!(again.not_modified);
    assert!(again.dialogs.is_empty() && again.messages.is_empty() && again.users.is_empty());
    assert_eq!((again.count, again.hash), (2, first.hash));
    // Anything shown of the page changes its hash.
    alice.mark_dialog_unread(InputPeer::user(c), true).await?;
    let changed = alice
        .get_dialogs(GetDialogsRequest {
            limit: 1,
            hash: first.hash,
            ..Default::default()
        })
        .await?;
    assert!(!changed.not_modified);
    assert_eq!(changed.dialogs.len(), 1);
    // A filter's page too: asked again with its hash it is not sent, until something it
    // shows changes.
    let filter = DialogFilter {
        id: 2,
        title: "Both".into(),
        include_peers: vec![Peer::user(b), Peer::user(c)],
        ..Default::default()
    };
    alice.update_dialog_filter(2, Some(filter)).await?;
    let filtered = |hash: i64| {
        alice.get_dialogs(GetDialogsRequest {
            filter_id: 2,
            limit: 10,
            hash,
            ..Default::default()
        })
    };
    let page = filtered(0).await?;
    assert!(!page.not_modified);
    assert_eq!((page.dialogs.len(), page.count), (2, 2));
    assert_eq!(page.hash, oxigram_proto::dialogs_hash(&page.dialogs));
    let again = filtered(page.hash).await?;
    assert!(again.not_modified);
    assert!(again.dialogs.is_empty() && again.messages.is_empty() && again.users.is_empty());
    assert_eq!((again.count, again.hash), (2, page.hash));
    alice.mark_dialog_unread(InputPeer::user(b), true).await?;
    let changed = filtered(page.hash).await?;
    assert!(!changed.not_modified);
    assert_eq!(changed.dialogs.len(), 2);
    assert_ne!(changed.hash, page.hash);
    // GetPeerDialogs: in the order asked, a peer without a dialog left out.
    let dave = system.device().await?;
    let mut dave = dave;
    let d = dave.sign_up("15557304", "Dave").await?.id;
    let peers = alice
        .get_peer_dialogs(vec![
            InputPeer::user(b),
            InputPeer::user(d),
            InputPeer::user(c),
        ])
        .await?;
    let listed: Vec<i64> = peers.dialogs.iter().map(Dialog::peer_user).collect();
    assert_eq!(listed, [b, c]);
    assert_eq!(peers.count, 2);
    assert_eq!(peers.messages.len(), 2, "with their top messages");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_syncs_to_the_other_devices_and_a_send_clears_it() -> anyhow::Result<()> {
    let system = system().await?;
    let ([phone, laptop], me) = system.user_on_devices::<2>("15557401", "Alice").await?;
    let [bob, carol] = system
        .users([("15557402", "Bob"), ("15557403", "Carol")])
        .await?;
    let (b, c) = (bob.user_id()?, carol.user_id()?);
    bob.send(me, 1, "hi").await?;
    carol.send(me, 1, "hello").await?;
    wait_dialogs(&phone, 2).await?;
    // Their messages' ids in Alice's box.
    let listed = server_folder(&phone, 0, 10).await?;
    let top_of = |peer: i64| {
        let dialog = listed.iter().find(|x| x.peer_user() == peer);
        dialog.map(|x| x.top_message_id).context("a dialog")
    };
    let (bobs_hi, carols_hello) = (top_of(b)?, top_of(c)?);
    // The draft answers Bob's message.
    let saved = phone
        .save_draft(SaveDraftRequest {
            peer: Some(InputPeer::user(b)),
            text: "half a thought".into(),
            reply_to_msg_id: bobs_hi,
            ..Default::default()
        })
        .await?;
    let draft_on = |dialogs: Vec<Dialog>| {
        dialogs
            .into_iter()
            .find(|x| x.peer_user() == b)
            .and_then(|x| x.draft)
    };
    let seen = draft_on(server_folder(&laptop, 0, 10).await?).context("the laptop sees it")?;
    assert_eq!(
        (seen.text.as_str(), seen.pts, seen.reply_to_msg_id),
        ("half a thought", saved.pts, bobs_hi)
    );
    // As a send's reply, a draft's names a message of its own dialog: not one of another
    // dialog, not one the box does not hold. Nothing of a refused draft is logged.
    let before = phone.get_state().await?.pts;
    for (reply_to_msg_id, what) in [
        (carols_hello, "a message of the dialog with Carol"),
        (987_654, "no message at all"),
    ] {
        let refused = phone
            .save_draft(SaveDraftRequest {
                peer: Some(InputPeer::user(b)),
                text: "another thought".into(),
                reply_to_msg_id,
                ..Default::default()
            })
            .await
            .map(|_| ())
            .map_err(|e| code(&e));
        assert_eq!(refused, Err("MESSAGE_ID_INVALID".to_owned()), "{what}");
    }
    assert_eq!(phone.get_state().await?.pts, before);
    // The laptop's log holds it, then the phone sends: the draft-cleared update follows.
    let mut laptop_mirror = Mirror::new();
    let (slices, _) = laptop.full_difference(0).await?;
    for u in slices.iter().flat_map(|s| &s.updates) {
        laptop_mirror.apply(u);
    }
    let synced = laptop_mirror.dialog(b).and_then(|d| d.draft.clone());
    assert_eq!(
        synced.map(|d| (d.text, d.reply_to_msg_id)),
        Some(("half a thought".to_owned(), bobs_hi))
    );
    phone.send(b, 5, "the whole thought").await?;
    let cleared = eventually(
        Duration::from_secs(10),
        "the draft-cleared update",
        || async {
            let (slices, _) = laptop.full_difference(saved.pts).await?;
            Ok(slices.iter().flat_map(|s| &s.updates).find_map(|u| {
                match u.update.as_ref().and_then(|u| u.kind.as_ref()) {
                    Some(update::Kind::DraftMessage(d)) if d.draft.is_none() => Some(u.clone()),
                    _ => None,
                }
            }))
        },
    )
    .await?;
    let Some(update::Kind::DraftMessage(d)) = cleared.update.as_ref().and_then(|u| u.kind.as_ref())
    else {
        anyhow::bail!("not a draft update");
    };
    assert_eq!(d.clears_pts, saved.pts);
    let (slices, _) = laptop.full_difference(saved.pts).await?;
    for u in slices.iter().flat_map(|s| &s.updates) {
        laptop_mirror.apply(u);
    }
    assert_eq!(laptop_mirror.dialog(b).and_then(|d| d.draft.clone()), None);
    // The projection applies it once the log hands it on.
    eventually(
        Duration::from_secs(10),
        "GetDialogs without the draft",
        || async {
            Ok(draft_on(server_folder(&laptop, 0, 10).await?)
                .is_none()
                .then_some(()))
        },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_settings_bar_is_for_strangers_who_wrote_first() -> anyhow::Result<()> {
    let system = system().await?;
    let [alice, bob, carol, dave] = system
        .users([
            ("15557501", "Alice"),
            ("15557502", "Bob"),
            ("15557503", "Carol"),
            ("15557504", "Dave"),
        ])
        .await?;
    let me = alice.user_id()?;
    let (b, c, d) = (bob.user_id()?, carol.user_id()?, dave.user_id()?);
    bob.send(me, 1, "buy now").await?;
    alice.send(c, 1, "hello Carol").await?;
    carol.send(me, 1, "hello Alice").await?;
    dave.send(me, 1, "it's Dave, my new number").await?;
    let shown = |s: oxigram_proto::types::v1::PeerSettings| s.report_spam && s.block_contact;
    let bar = eventually(Duration::from_secs(5), "the bar", || async {
        Ok(Some(alice.get_peer_settings(InputPeer::user(b)).await?).filter(|s| shown(*s)))
    })
    .await?;
    assert!(bar.add_contact);
    assert!(
        !shown(alice.get_peer_settings(InputPeer::user(c)).await?),
        "Alice wrote first"
    );
    // A stranger she keeps as a contact already is not offered as one.
    alice.import_contacts(&[("15557504", "Dave", "")]).await?;
    let bar = eventually(Duration::from_secs(5), "Dave's bar", || async {
        Ok(Some(alice.get_peer_settings(InputPeer::user(d)).await?).filter(|s| shown(*s)))
    })
    .await?;
    assert!(!bar.add_contact, "Dave is her contact");

    // Hiding it is a change of her log, answered with its pts like her other settings.
    let hidden = alice.hide_peer_settings_bar(InputPeer::user(b)).await?;
    assert!(hidden.pts > 0, "logged in time");
    assert!(matches!(
        hidden.update.and_then(|u| u.kind),
        Some(update::Kind::PeerSettingsBarHidden(h)) if h.peer_user() == b
    ));
    assert!(!shown(alice.get_peer_settings(InputPeer::user(b)).await?));
    let listed = alice.get_peer_dialogs(vec![InputPeer::user(b)]).await?;
    assert!(listed.dialogs.iter().all(|d| d.settings_bar_hidden));
    assert_eq!(listed.dialogs.len(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_page_by_their_rules() -> anyhow::Result<()> {
    let system = system().await?;
    let [alice, bob, carol, dave] = system
        .users([
            ("15557601", "Alice"),
            ("15557602", "Bob"),
            ("15557603", "Carol"),
            ("15557604", "Dave"),
        ])
        .await?;
    let me = alice.user_id()?;
    let (b, c, d) = (bob.user_id()?, carol.user_id()?, dave.user_id()?);
    for (i, peer) in [&bob, &carol, &dave].into_iter().enumerate() {
        peer.send(me, i as i64 + 1, "hi").await?;
    }
    wait_dialogs(&alice, 3).await?;
    alice
        .update_notify_settings(
            InputPeer::user(c),
            PeerNotifySettings {
                mute_until: MUTE_FOREVER,
                ..Default::default()
            },
        )
        .await?;
    let filter = DialogFilter {
        id: 2,
        title: "  Work ".into(),
        contacts: true,
        non_contacts: true,
        exclude_muted: true,
        pinned_peers: vec![Peer::user(b)],
        ..Default::default()
    };
    alice.update_dialog_filter(2, Some(filter.clone())).await?;
    alice
        .update_dialog_filter(
            3,
            Some(DialogFilter {
                id: 3,
                title: "Dave".into(),
                include_peers: vec![Peer::user(d)],
                ..Default::default()
            }),
        )
        .await?;
    alice.update_dialog_filters_order(vec![3, 2]).await?;
    let filters = alice.get_dialog_filters().await?;
    let ids: Vec<(i32, &str)> = filters.iter().map(|f| (f.id, f.title.as_str())).collect();
    assert_eq!(
        ids,
        [(3, "Dave"), (2, "Work")],
        "ordered, the title trimmed"
    );
    let page = |filter_id| {
        let alice = &alice;
        async move {
            let slice = alice
                .get_dialogs(GetDialogsRequest {
                    filter_id,
                    limit: 10,
                    ..Default::default()
                })
                .await?;
            let peers: Vec<(i64, bool)> = slice
                .dialogs
                .iter()
                .map(|x| (x.peer_user(), x.pinned))
                .collect();
            anyhow::Ok((peers, slice.count))
        }
    };
    assert_eq!(
        page(2).await?,
        (vec![(b, true), (d, false)], 2),
        "Carol is muted"
    );
    assert_eq!(page(3).await?, (vec![(d, false)], 1));
    // Contacts and non-contacts, by the contacts Alice keeps: her log's contact updates tell
    // svc-dialogs, so a change shows once the projection has applied it.
    let category = |id, contacts| DialogFilter {
        id,
        title: if contacts { "Friends" } else { "Others" }.into(),
        contacts,
        non_contacts: !contacts,
        ..Default::default()
    };
    alice
        .update_dialog_filter(4, Some(category(4, true)))
        .await?;
    alice
        .update_dialog_filter(5, Some(category(5, false)))
        .await?;
    let pages = |friends: Vec<(i64, bool)>, others: Vec<(i64, bool)>| {
        let page = &page;
        let want = (
            (friends.clone(), friends.len() as i32),
            (others.clone(), others.len() as i32),
        );
        async move {
            eventually(Duration::from_secs(10), "the contacts filters", || async {
                let seen = (page(4).await?, page(5).await?);
                Ok((seen == want).then_some(()))
            })
            .await
        }
    };
    // No contacts yet: every peer is a non-contact, newest first.
    pages(vec![], vec![(d, false), (c, false), (b, false)]).await?;
    alice.import_contacts(&[("15557602", "Bob", "")]).await?;
    pages(vec![(b, false)], vec![(d, false), (c, false)]).await?;
    alice
        .import_contacts(&[("+15557604", "Dave", "B.")])
        .await?;
    // Carol, muted, stays.
    pages(vec![(d, false), (b, false)], vec![(c, false)]).await?;
    alice.delete_contacts(&[b]).await?;
    pages(vec![(d, false)], vec![(c, false), (b, false)]).await?;
    alice.update_dialog_filter(3, None).await?;
    let gone = alice
        .get_dialogs(GetDialogsRequest {
            filter_id: 3,
            ..Default::default()
        })
        .await;
    assert_eq!(
        gone.map(|_| ()).map_err(|e| code(&e)),
        Err("FILTER_ID_INVALID".into())
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_are_refused_with_their_codes() -> anyhow::Result<()> {
    let system = system().await?;
    let [alice, bob, stranger] = system
        .users([
            ("15557801", "Alice"),
            ("15557802", "Bob"),
            ("15557803", "Stranger"),
        ])
        .await?;
    let me = alice.user_id()?;
    let b = bob.user_id()?;
    let s = stranger.user_id()?;
    bob.send(me, 1, "hi").await?;
    wait_dialogs(&alice, 1).await?;
    let good_filter = DialogFilter {
        id: 2,
        title: "ok".into(),
        include_peers: vec![Peer::user(b)],
        ..Default::default()
    };
    let many = |n: i64| (1..=n).map(|i| Peer::user(1_000 + i)).collect::<Vec<_>>();
    let good = &good_filter;
    type Call<'a> = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), oxigram_client::Error>> + Send + 'a>,
    >;
    let a = &alice;
    let unit = |r: Result<PtsUpdate, oxigram_client::Error>| r.map(|_| ());
    let table: Vec<(&str, Call<'_>, &str)> = vec![
        (
            "pin a peer of no dialog",
            Box::pin(async move { unit(a.toggle_dialog_pin(InputPeer::user(s), true).await) }),
            "PEER_ID_INVALID",
        ),
        (
            "pin no user",
            Box::pin(async move { unit(a.toggle_dialog_pin(InputPeer::user(0), true).await) }),
            "PEER_ID_INVALID",
        ),
        (
            "pin a user that does not exist",
            Box::pin(
                async move { unit(a.toggle_dialog_pin(InputPeer::user(987_654), true).await) },
            ),
            "PEER_ID_INVALID",
        ),
        (
            "reorder a folder that is none",
            Box::pin(async move { unit(a.reorder_pinned_dialogs(2, vec![], false).await) }),
            "FOLDER_ID_INVALID",
        ),
        (
            "reorder with a peer of another folder",
            Box::pin(async move {
                unit(
                    a.reorder_pinned_dialogs(1, vec![InputPeer::user(b)], false)
                        .await,
                )
            }),
            "PEER_ID_INVALID",
        ),
        (
            "reorder past the most pinned",
            Box::pin(async move {
                let order = (1..=MAX_PINNED_DIALOGS as i64 + 1)
                    .map(|i| InputPeer::user(1_000 + i))
                    .collect();
                unit(a.reorder_pinned_dialogs(0, order, true).await)
            }),
            "PINNED_DIALOGS_TOO_MUCH",
        ),
        (
            "move to a folder that is none",
            Box::pin(async move { unit(a.edit_peer_folders(vec![(InputPeer::user(b), 5)]).await) }),
            "FOLDER_ID_INVALID",
        ),
        (
            "move nothing",
            Box::pin(async move { unit(a.edit_peer_folders(vec![]).await) }),
            "LIMIT_INVALID",
        ),
        (
            "mark a user that does not exist",
            Box::pin(
                async move { unit(a.mark_dialog_unread(InputPeer::user(987_654), true).await) },
            ),
            "PEER_ID_INVALID",
        ),
        (
            "mute until a negative time",
            Box::pin(async move {
                let settings = PeerNotifySettings {
                    mute_until: -1,
                    ..Default::default()
                };
                unit(a.update_notify_settings(InputPeer::user(b), settings).await)
            }),
            "NOTIFY_SETTINGS_INVALID",
        ),
        (
            "a draft too long",
            Box::pin(async move {
                unit(
                    a.save_draft(SaveDraftRequest {
                        peer: Some(InputPeer::user(b)),
                        text: "x".repeat(4097),
                        ..Default::default()
                    })
                    .await,
                )
            }),
            "MESSAGE_TOO_LONG",
        ),
        (
            "a draft with NUL",
            Box::pin(async move {
                unit(
                    a.save_draft(SaveDraftRequest {
                        peer: Some(InputPeer::user(b)),
                        text: "a\0b".into(),
                        ..Default::default()
                    })
                    .await,
                )
            }),
            "INPUT_TEXT_INVALID",
        ),
        (
            "a draft entity past its text",
            Box::pin(async move {
                unit(
                    a.save_draft(SaveDraftRequest {
                        peer: Some(InputPeer::user(b)),
                        text: "abc".into(),
                        entities: vec![MessageEntity {
                            kind: message_entity::Kind::Bold.into(),
                            offset: 1,
                            length: 9,
                            ..Default::default()
                        }],
                        ..Default::default()
                    })
                    .await,
                )
            }),
            "ENTITY_BOUNDS_INVALID",
        ),
        (
            "a draft replying to a negative id",
            Box::pin(async move {
                unit(
                    a.save_draft(SaveDraftRequest {
                        peer: Some(InputPeer::user(b)),
                        text: "x".into(),
                        reply_to_msg_id: -1,
                        ..Default::default()
                    })
                    .await,
                )
            }),
            "MESSAGE_ID_INVALID",
        ),
        (
            "a draft replying to no message",
            Box::pin(async move {
                unit(
                    a.save_draft(SaveDraftRequest {
                        peer: Some(InputPeer::user(b)),
                        text: "x".into(),
                        reply_to_msg_id: 987_654,
                        ..Default::default()
                    })
                    .await,
                )
            }),
            "MESSAGE_ID_INVALID",
        ),
        (
            "a filter id of a folder",
            Box::pin(async move { unit(a.update_dialog_filter(1, Some(good.clone())).await) }),
            "FILTER_ID_INVALID",
        ),
        (
            "a filter without a title",
            Box::pin(async move {
                let f = DialogFilter {
                    title: "  ".into(),
                    ..good.clone()
                };
                unit(a.update_dialog_filter(2, Some(f)).await)
            }),
            "FILTER_TITLE_EMPTY",
        ),
        (
            "a filter title too long",
            Box::pin(async move {
                let f = DialogFilter {
                    title: "x".repeat(13),
                    ..good.clone()
                };
                unit(a.update_dialog_filter(2, Some(f)).await)
            }),
            "FILTER_TITLE_INVALID",
        ),
        (
            "a filter that includes nothing",
            Box::pin(async move {
                let f = DialogFilter {
                    include_peers: vec![],
                    ..good.clone()
                };
                unit(a.update_dialog_filter(2, Some(f)).await)
            }),
            "FILTER_INCLUDE_EMPTY",
        ),
        (
            "a filter including too many",
            Box::pin(async move {
                let f = DialogFilter {
                    include_peers: many(101),
                    ..good.clone()
                };
                unit(a.update_dialog_filter(2, Some(f)).await)
            }),
            "FILTER_INCLUDE_TOO_MUCH",
        ),
        (
            "a filter excluding too many",
            Box::pin(async move {
                let f = DialogFilter {
                    exclude_peers: many(101),
                    ..good.clone()
                };
                unit(a.update_dialog_filter(2, Some(f)).await)
            }),
            "FILTER_EXCLUDE_TOO_MUCH",
        ),
        (
            "a filter with a peer of no user",
            Box::pin(async move {
                let f = DialogFilter {
                    exclude_peers: vec![Peer::user(-4)],
                    ..good.clone()
                };
                unit(a.update_dialog_filter(2, Some(f)).await)
            }),
            "PEER_ID_INVALID",
        ),
        (
            "delete a filter that is none",
            Box::pin(async move { unit(a.update_dialog_filter(7, None).await) }),
            "FILTER_ID_INVALID",
        ),
        (
            "order filters that are none",
            Box::pin(async move { unit(a.update_dialog_filters_order(vec![7]).await) }),
            "FILTER_ID_INVALID",
        ),
        (
            "dialogs of a folder that is none",
            Box::pin(async move {
                a.get_dialogs(GetDialogsRequest {
                    folder_id: 2,
                    ..Default::default()
                })
                .await
                .map(|_| ())
            }),
            "FOLDER_ID_INVALID",
        ),
        (
            "dialogs of a filter that is none",
            Box::pin(async move {
                a.get_dialogs(GetDialogsRequest {
                    filter_id: 7,
                    ..Default::default()
                })
                .await
                .map(|_| ())
            }),
            "FILTER_ID_INVALID",
        ),
        (
            "too many peer dialogs",
            Box::pin(async move {
                let peers = (1..=101).map(InputPeer::user).collect();
                a.get_peer_dialogs(peers).await.map(|_| ())
            }),
            "LIMIT_INVALID",
        ),
    ];
    for (name, call, expected) in table {
        let got = call.await.map_err(|e| code(&e));
        assert_eq!(got, Err(expected.to_owned()), "{name}");
    }
    // A filter by contacts of a user without contacts is an empty list, not an error.
    let by_contacts = DialogFilter {
        id: 4,
        title: "contacts".into(),
        contacts: true,
        ..Default::default()
    };
    alice.update_dialog_filter(4, Some(by_contacts)).await?;
    let empty = alice
        .get_dialogs(GetDialogsRequest {
            filter_id: 4,
            ..Default::default()
        })
        .await?;
    assert_eq!((empty.dialogs.len(), empty.count), (0, 0));
    // The most filters a user has.
    for id in 5..(5 + 29) {
        let f = DialogFilter { id, ..good.clone() };
        alice.update_dialog_filter(id, Some(f)).await?;
    }
    let one_more = DialogFilter {
        id: 200,
        ..good.clone()
    };
    let got = alice
        .update_dialog_filter(200, Some(one_more))
        .await
        .map(|_| ())
        .map_err(|e| code(&e));
    assert_eq!(got, Err("DIALOG_FILTERS_TOO_MUCH".to_owned()));
    // Nothing refused was logged: the log holds the settings that were taken, only.
    let state = alice.get_state().await?;
    let (slices, _) = alice.full_difference(0).await?;
    let filters_logged = slices
        .iter()
        .flat_map(|s| &s.updates)
        .filter(|u| {
            matches!(
                u.update.as_ref().and_then(|u| u.kind.as_ref()),
                Some(update::Kind::DialogFilter(_))
            )
        })
        .count();
    assert_eq!(filters_logged, 30);
    assert!(state.pts > 0);
    Ok(())
}
