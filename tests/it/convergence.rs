//! Convergence: two users with three devices each run a few hundred random operations (drawn
//! from a fixed seed: sends, replies, edits, media sends (documents and photos uploaded in
//! parts, with or without a caption) and media edits (another file, another caption),
//! forwards, deletes with and without revoke, clears, reads, receipts) while device streams
//! are cut and reopened from their saved state,
//! and offline devices catch up by getDifference. Each device keeps its account's local state
//! with the client library (`oxigram_client::Mirror`), built only from the updates it
//! applies. At the end every device's copy equals what the server answers (`GetDialogs`, and
//! `GetHistory` paged through for every dialog), unread counts and every message's file (kind,
//! content, name, type, sizes) and caption included; every device applied
//! its log contiguously, each update once, and no message twice; and nothing deleted is found
//! again by history, `GetMessages` or search.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use anyhow::Context;
use oxigram_client::{
    CatchUp, Client, Event, Mirror, SentUpdates, Sequencer, State, StreamOptions, UpdateStream,
};
use oxigram_proto::{
    api::v1::{
        DeleteHistoryRequest, ForwardMessagesRequest, GetDialogsRequest, GetHistoryRequest,
        GetMessagesRequest, InputMedia, InputSingleMedia, ReceivedMessagesRequest, SearchRequest,
        SendMediaRequest, SendMessageRequest,
    },
    types::v1::{
        Dialog, EditMessageRequest, EditMessageResponse, InputPeer, Message, PtsUpdate,
        message_media::Kind, update,
    },
};
use oxigram_tests::{Mode, System, TestClient};
use rand::{Rng, SeedableRng, rngs::StdRng};
use tokio::{task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

const SEED: u64 = 0x15_c0_4e;
const OPERATIONS: usize = 400;
const DEVICES_PER_USER: usize = 3;
const DEVICES: usize = 2 * DEVICES_PER_USER;
/// Longest the system may take to settle once the operations are done.
const SETTLE: Duration = Duration::from_secs(30);

/// One operation of the run, drawn from the seed up front. Which message it acts on is
/// resolved when its turn comes, against what the acting device knows then (`pick` indexes
/// the candidates), as an application acts on what it shows.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// A message to the other user.
    Send { device: usize },
    /// A note to self (Saved Messages).
    Note { device: usize },
    /// A reply to a message the device knows in the dialog with the other user.
    Reply { device: usize, pick: usize },
    /// An edit of one of the user's own messages the device knows (not a forward).
    Edit { device: usize, pick: usize },
    /// A file to the other user, uploaded in parts: a document with a name and MIME type, or
    /// a small JPEG as a photo; with a caption or none.
    SendMedia {
        device: usize,
        photo: bool,
        caption: bool,
    },
    /// An edit of one of the user's own media messages the device knows: another file
    /// (`file`: a photo, or a document) with a new caption or none, or only a new caption.
    EditMedia {
        device: usize,
        pick: usize,
        file: Option<bool>,
        caption: bool,
    },
    /// A forward of a message the device knows in the dialog with the other user, back to
    /// her or to Saved Messages.
    Forward {
        device: usize,
        pick: usize,
        to_self: bool,
    },
    /// A delete of one to three messages the device knows in the dialog with the other user
    /// or in Saved Messages; with `revoke` the other user's boxes of them go too.
    Delete {
        device: usize,
        pick: usize,
        saved: bool,
        revoke: bool,
    },
    /// Clears the dialog with the other user, batch after batch, for both sides or for the
    /// user alone.
    Clear { device: usize, revoke: bool },
    /// Reads the dialog with the other user up to an incoming message the device knows, or
    /// all of it.
    Read { device: usize, pick: Option<usize> },
    /// The device reports what it stored (DELIVERED, for the sender).
    Received { device: usize },
    /// Cuts the device's stream (its state and local copy kept), or reopens it from them: at
    /// once, or after catching up by getDifference.
    Toggle { device: usize, by_difference: bool },
    /// An offline device catches up by getDifference and stays offline.
    CatchUp { device: usize },
}

fn draw(rng: &mut StdRng) -> Op {
    let device = rng.random_range(0..DEVICES);
    let pick = rng.random_range(0..1 << 16);
    match rng.random_range(0..230) {
        0..50 => Op::Send { device },
        50..58 => Op::Note { device },
        58..78 => Op::Reply { device, pick },
        78..100 => Op::Edit { device, pick },
        100..112 => Op::Forward {
            device,
            pick,
            to_self: rng.random_bool(0.3),
        },
        112..128 => Op::Delete {
            device,
            pick,
            saved: rng.random_bool(0.2),
            revoke: rng.random_bool(0.5),
        },
        128..130 => Op::Clear {
            device,
            revoke: rng.random_bool(0.5),
        },
        130..150 => Op::Read {
            device,
            pick: rng.random_bool(0.5).then_some(pick),
        },
        150..160 => Op::Received { device },
        160..188 => Op::Toggle {
            device,
            by_difference: rng.random_bool(0.5),
        },
        200..215 => Op::SendMedia {
            device,
            photo: rng.random_bool(0.4),
            caption: rng.random_bool(0.7),
        },
        215..230 => Op::EditMedia {
            device,
            pick,
            file: rng.random_bool(0.7).then(|| rng.random_bool(0.4)),
            caption: rng.random_bool(0.7),
        },
        _ => Op::CatchUp { device },
    }
}

/// MIME types a document of the run is sent with.
const MIME_TYPES: [&str; 3] = ["application/pdf", "text/plain", "application/octet-stream"];

/// The file of operation `i`, drawn from the seed and the operation (so the run stays the
/// same whichever device acts): a small JPEG of random colours for a photo, else a few KiB
/// of random bytes with a name and one of [`MIME_TYPES`].
fn file_of(i: usize, photo: bool) -> anyhow::Result<(InputMedia, Vec<u8>, String)> {
    let mut rng = StdRng::seed_from_u64(SEED ^ (i as u64).rotate_left(32));
    if photo {
        let (w, h) = (rng.random_range(8..48), rng.random_range(8..48));
        let image = image::RgbImage::from_fn(w, h, |_, _| image::Rgb(rng.random()));
        let mut jpeg = std::io::Cursor::new(Vec::new());
        image.write_to(&mut jpeg, image::ImageFormat::Jpeg)?;
        let media = InputMedia {
            kind: Kind::Photo as i32,
            ..InputMedia::default()
        };
        return Ok((media, jpeg.into_inner(), format!("photo-{i}.jpg")));
    }
    let mut bytes = vec![0u8; rng.random_range(1..6000)];
    rng.fill(&mut bytes[..]);
    let name = format!("file-{i}.bin");
    let media = InputMedia {
        kind: Kind::Document as i32,
        mime_type: MIME_TYPES[rng.random_range(0..MIME_TYPES.len())].into(),
        file_name: name.clone(),
        ..InputMedia::default()
    };
    Ok((media, bytes, name))
}

/// A message as the comparison sees it: all of it, its file included, but the file reference,
/// which every read stamps afresh for its reader (it proves when she read it, not what).
fn compared(m: &Message) -> Message {
    let mut m = m.clone();
    if let Some(media) = m.media.as_mut() {
        media.file_reference.clear();
    }
    m
}

/// What a device knows, from its updates alone.
#[derive(Default)]
struct Local {
    mirror: Mirror,
    /// The pts of the last update applied.
    pts: i32,
    /// Updates applied that did not continue the one before.
    breaks: u64,
    /// Every id a delete update named: never to be found again.
    deleted: BTreeSet<i64>,
}

impl Local {
    /// Counts an update that does not continue the one before.
    fn check(&mut self, update: &PtsUpdate) {
        if update.pts - update.pts_count != self.pts {
            self.breaks += 1;
        }
        self.pts = update.pts;
        if let Some(update::Kind::DeleteMessages(d)) =
            update.update.as_ref().and_then(|u| u.kind.as_ref())
        {
            self.deleted.extend(&d.ids);
        }
    }

    /// An update a catch-up applied.
    fn apply(&mut self, update: &PtsUpdate) {
        self.check(update);
        self.mirror.apply(update);
    }

    /// An event of the update stream.
    fn follow(&mut self, event: &Event) {
        if let Event::Update(applied) = event {
            self.check(&applied.update);
        }
        self.mirror.follow(event);
    }
}

/// A refusal naming the message acted on.
fn refuses_id(status: &tonic::Status) -> bool {
    oxigram_errors::code_of(status).as_deref() == Some("MESSAGE_ID_INVALID")
}

fn lock(local: &Mutex<Local>) -> MutexGuard<'_, Local> {
    local.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A device's open stream, followed by a task that applies it to the local copy.
struct Online {
    stop: CancellationToken,
    sent: SentUpdates,
    task: JoinHandle<anyhow::Result<(State, u64)>>,
}

struct Device {
    client: TestClient,
    /// 0 or 1.
    user: usize,
    local: Arc<Mutex<Local>>,
    /// The state to resume from (current while offline).
    saved: State,
    online: Option<Online>,
    /// Discontinuities counted by every sequencer the device used.
    discontinuities: u64,
}

fn stream_options() -> StreamOptions {
    StreamOptions {
        gap_wait: Duration::from_millis(300),
        // The system stays up: a lost stream is a failure here.
        max_reconnects: Some(0),
        ..StreamOptions::default()
    }
}

/// Applies the stream's events to the local copy until told to stop; answers the state to
/// resume from and the discontinuities the stream's sequencer counted.
async fn follow(
    mut stream: UpdateStream,
    local: Arc<Mutex<Local>>,
    stop: CancellationToken,
) -> anyhow::Result<(State, u64)> {
    loop {
        let event = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            // Cancel-safe: an event not yet returned is not in the state either.
            event = stream.next() => event,
        };
        match &event {
            Event::TooLong { pts } => anyhow::bail!("the log was too long to replay (to {pts})"),
            Event::Failed { during, error } => {
                anyhow::bail!("the update stream failed ({during:?}): {error}")
            }
            Event::Update(_)
            | Event::Gap { .. }
            | Event::Resumed { .. }
            | Event::Paced { .. }
            | Event::Typing(_)
            | Event::Status(_)
            | Event::User(_) => {}
        }
        lock(&local).follow(&event);
    }
    Ok((stream.state(), stream.stats().discontinuities))
}

impl Device {
    fn new(client: TestClient, user: usize) -> Self {
        Self {
            client,
            user,
            local: Arc::default(),
            saved: State::default(),
            online: None,
            discontinuities: 0,
        }
    }

    async fn go_online(&mut self, by_difference: bool) -> anyhow::Result<()> {
        if self.online.is_some() {
            return Ok(());
        }
        if by_difference {
            self.catch_up().await?;
        }
        let stream =
            UpdateStream::open(Client::clone(&self.client), self.saved, stream_options()).await?;
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
        let (state, discontinuities) = online.task.await??;
        self.saved = state;
        self.discontinuities += discontinuities;
        Ok(())
    }

    /// getDifference from the saved state, slice after slice, into the local copy.
    async fn catch_up(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.online.is_none(), "catching up beside a live stream");
        let mut seq = Sequencer::new(self.saved);
        let local = &self.local;
        let outcome = self
            .client
            .catch_up(&mut seq, |u, _| lock(local).apply(&u))
            .await?;
        anyhow::ensure!(outcome == CatchUp::Done, "catch-up ended {outcome:?}");
        self.discontinuities += seq.discontinuities();
        self.saved = seq.state();
        Ok(())
    }

    /// The ids of the device's messages in the dialog with `peer` that `keep` selects, oldest
    /// first.
    fn known(&self, peer: i64, keep: impl Fn(&Message) -> bool) -> Vec<i64> {
        lock(&self.local)
            .mirror
            .history(peer)
            .iter()
            .rev()
            .filter(|m| keep(m))
            .map(|m| m.id)
            .collect()
    }
}

/// What the run did, for the log and to check it did enough of everything.
#[derive(Debug, Default)]
struct Tally {
    sent: u32,
    notes: u32,
    replies: u32,
    edits: u32,
    media_sent: u32,
    photos_sent: u32,
    media_edits: u32,
    /// Media edits that replaced the file (the rest replaced the caption only).
    file_edits: u32,
    forwards: u32,
    deletes: u32,
    revokes: u32,
    clears: u32,
    reads: u32,
    receipts: u32,
    cuts: u32,
    reopened_on_stream: u32,
    reopened_after_difference: u32,
    offline_catch_ups: u32,
    /// Operations that found nothing to act on (an edit before the device knew a message).
    idle: u32,
    /// Operations refused because the message they named was deleted meanwhile.
    stale: u32,
}

struct Run {
    devices: Vec<Device>,
    users: [i64; 2],
    tally: Tally,
}

impl Run {
    fn peer_of(&self, device: usize) -> i64 {
        self.users[1 - self.devices[device].user]
    }

    fn me_of(&self, device: usize) -> i64 {
        self.users[self.devices[device].user]
    }

    /// Sends; false when the message replied to was deleted meanwhile (see [`Run::stale`]).
    async fn send(
        &mut self,
        device: usize,
        i: usize,
        peer: i64,
        reply_to: i64,
    ) -> anyhow::Result<bool> {
        let d = &self.devices[device];
        let answer = d
            .client
            .send_message(SendMessageRequest {
                peer: Some(InputPeer::user(peer)),
                // One per operation: a send is never a replay here.
                random_id: i as i64 + 1,
                text: format!("message {i} from device {device}"),
                reply_to_msg_id: reply_to,
                ..SendMessageRequest::default()
            })
            .await;
        let answer = match answer {
            Err(e)
                if e.code() == "REPLY_MESSAGE_ID_INVALID"
                    && self.stale(device, reply_to).await? =>
            {
                return Ok(false);
            }
            answer => answer.with_context(|| format!("operation {i}: send"))?,
        };
        if let Some(online) = &d.online {
            online.sent.answer(answer);
        }
        Ok(true)
    }

    /// Uploads the file of operation `i` as the device's user ([`file_of`]) and answers it as
    /// a message's media.
    async fn upload(&self, device: usize, i: usize, photo: bool) -> anyhow::Result<InputMedia> {
        let (media, bytes, name) = file_of(i, photo)?;
        // One upload per operation: its id is never one of an earlier upload's.
        let file = self.devices[device]
            .client
            .upload(i as i64 + 1, &bytes, &name)
            .await
            .with_context(|| format!("operation {i}: upload"))?;
        Ok(InputMedia {
            file_id: file.id,
            ..media
        })
    }

    /// Hands the answer of the device's edit of message `id` to its stream; false when the
    /// message was deleted meanwhile (see [`Run::stale`]).
    async fn edited(
        &self,
        device: usize,
        i: usize,
        id: i64,
        answer: Result<EditMessageResponse, tonic::Status>,
    ) -> anyhow::Result<bool> {
        let answer = match answer {
            Err(e) if refuses_id(&e) && self.stale(device, id).await? => return Ok(false),
            answer => answer.with_context(|| format!("operation {i}: edit"))?,
        };
        if let Some(online) = &self.devices[device].online {
            online.sent.answer_edit(answer);
        }
        Ok(true)
    }

    /// Whether the device acted on a message that is gone: another device of its user, or
    /// the peer with a revoke, deleted it, and the device has not applied that delete yet.
    /// Then a refusal naming the message is the right answer, as for any application that
    /// shows a message a moment longer than it exists.
    async fn stale(&self, device: usize, id: i64) -> anyhow::Result<bool> {
        let found = self.devices[device]
            .client
            .messages()
            .get_messages(GetMessagesRequest { ids: vec![id] })
            .await?
            .into_inner()
            .messages;
        Ok(found.is_empty())
    }

    /// Runs operation `i`: the one place each kind of operation acts.
    async fn run(&mut self, i: usize, op: Op) -> anyhow::Result<()> {
        match op {
            Op::Send { device } => {
                self.send(device, i, self.peer_of(device), 0).await?;
                self.tally.sent += 1;
            }
            Op::Note { device } => {
                self.send(device, i, self.me_of(device), 0).await?;
                self.tally.notes += 1;
            }
            Op::Reply { device, pick } => {
                let peer = self.peer_of(device);
                let known = self.devices[device].known(peer, |_| true);
                let reply_to = if known.is_empty() {
                    0
                } else {
                    known[pick % known.len()]
                };
                if self.send(device, i, peer, reply_to).await? {
                    self.tally.replies += 1;
                } else {
                    self.tally.stale += 1;
                }
            }
            Op::Edit { device, pick } => {
                let peer = self.peer_of(device);
                let d = &self.devices[device];
                // A forward is not its forwarder's to edit.
                let own = d.known(peer, |m| m.out && m.fwd_from.is_none());
                if own.is_empty() {
                    self.tally.idle += 1;
                    return Ok(());
                }
                let text = format!("edited by operation {i}");
                let id = own[pick % own.len()];
                let answer = d.client.edit(peer, id, &text).await;
                if self.edited(device, i, id, answer).await? {
                    self.tally.edits += 1;
                } else {
                    self.tally.stale += 1;
                }
            }
            Op::SendMedia {
                device,
                photo,
                caption,
            } => {
                let media = self.upload(device, i, photo).await?;
                let d = &self.devices[device];
                let sent = d
                    .client
                    .messages()
                    .send_media(SendMediaRequest {
                        peer: Some(InputPeer::user(self.peer_of(device))),
                        multi_media: vec![InputSingleMedia {
                            media: Some(media),
                            random_id: i as i64 + 1,
                            caption: if caption {
                                format!("media {i} from device {device}")
                            } else {
                                String::new()
                            },
                            entities: vec![],
                        }],
                        ..SendMediaRequest::default()
                    })
                    .await
                    .with_context(|| format!("operation {i}: send media"))?
                    .into_inner();
                if let Some(online) = &d.online {
                    for answer in sent.sent {
                        online.sent.answer(answer);
                    }
                }
                self.tally.media_sent += 1;
                if photo {
                    self.tally.photos_sent += 1;
                }
            }
            Op::EditMedia {
                device,
                pick,
                file,
                caption,
            } => {
                let peer = self.peer_of(device);
                let own = self.devices[device]
                    .known(peer, |m| m.out && m.fwd_from.is_none() && m.media.is_some());
                if own.is_empty() {
                    self.tally.idle += 1;
                    return Ok(());
                }
                let new_media = match file {
                    Some(photo) => Some(self.upload(device, i, photo).await?),
                    None => None,
                };
                let id = own[pick % own.len()];
                let d = &self.devices[device];
                let answer = d
                    .client
                    .messages()
                    .edit_message(EditMessageRequest {
                        peer: Some(InputPeer::user(peer)),
                        id,
                        // An edit sets the caption as it sets a text: empty is none, with a
                        // new file or without one.
                        text: if caption {
                            format!("media edited by operation {i}")
                        } else {
                            String::new()
                        },
                        new_media,
                        ..EditMessageRequest::default()
                    })
                    .await
                    .map(tonic::Response::into_inner);
                // Emptying a caption that is empty already is refused, and changes nothing.
                if let Err(e) = &answer
                    && file.is_none()
                    && !caption
                    && oxigram_errors::code_of(e).as_deref() == Some("MESSAGE_NOT_MODIFIED")
                {
                    self.tally.idle += 1;
                    return Ok(());
                }
                if !self.edited(device, i, id, answer).await? {
                    self.tally.stale += 1;
                    return Ok(());
                }
                self.tally.media_edits += 1;
                if file.is_some() {
                    self.tally.file_edits += 1;
                }
            }
            Op::Forward {
                device,
                pick,
                to_self,
            } => {
                let peer = self.peer_of(device);
                let d = &self.devices[device];
                let known = d.known(peer, |_| true);
                if known.is_empty() {
                    self.tally.idle += 1;
                    return Ok(());
                }
                let to = if to_self { self.me_of(device) } else { peer };
                let id = known[pick % known.len()];
                let answers = d
                    .client
                    .forward(ForwardMessagesRequest {
                        from_peer: Some(InputPeer::user(peer)),
                        ids: vec![id],
                        random_ids: vec![i as i64 + 1],
                        to_peer: Some(InputPeer::user(to)),
                        drop_author: pick % 4 == 0,
                        ..ForwardMessagesRequest::default()
                    })
                    .await;
                let answers = match answers {
                    Err(e) if refuses_id(&e) && self.stale(device, id).await? => {
                        self.tally.stale += 1;
                        return Ok(());
                    }
                    answers => answers.with_context(|| format!("operation {i}: forward"))?,
                };
                if let Some(online) = &d.online {
                    for answer in answers {
                        online.sent.answer(answer);
                    }
                }
                self.tally.forwards += 1;
            }
            Op::Delete {
                device,
                pick,
                saved,
                revoke,
            } => {
                let dialog = if saved {
                    self.me_of(device)
                } else {
                    self.peer_of(device)
                };
                let d = &self.devices[device];
                let known = d.known(dialog, |_| true);
                if known.is_empty() {
                    self.tally.idle += 1;
                    return Ok(());
                }
                let ids: Vec<i64> = (0..=pick % 3)
                    .map(|k| known[(pick + 7 * k) % known.len()])
                    .collect();
                let answer = d
                    .client
                    .delete(&ids, revoke)
                    .await
                    .with_context(|| format!("operation {i}: delete"))?;
                if let Some(online) = &d.online {
                    online.sent.answer_delete(&ids, answer);
                }
                self.tally.deletes += 1;
                if revoke {
                    self.tally.revokes += 1;
                }
            }
            Op::Clear { device, revoke } => {
                let peer = self.peer_of(device);
                let d = &self.devices[device];
                // The device's own updates of a clear reach it by getDifference, as a gap.
                loop {
                    let batch = d
                        .client
                        .delete_history(DeleteHistoryRequest {
                            peer: Some(InputPeer::user(peer)),
                            max_id: 0,
                            just_clear: false,
                            revoke,
                        })
                        .await
                        .with_context(|| format!("operation {i}: clear"))?;
                    if batch.offset == 0 {
                        break;
                    }
                }
                self.tally.clears += 1;
            }
            Op::Read { device, pick } => {
                let peer = self.peer_of(device);
                let d = &self.devices[device];
                let incoming = d.known(peer, |m| !m.out);
                let max_id = match pick {
                    Some(pick) if !incoming.is_empty() => incoming[pick % incoming.len()],
                    _ => 0,
                };
                d.client
                    .read_history(InputPeer::user(peer), max_id)
                    .await
                    .with_context(|| format!("operation {i}: read"))?;
                self.tally.reads += 1;
            }
            Op::Received { device } => {
                let d = &self.devices[device];
                let max_id = {
                    let local = lock(&d.local);
                    let peer = self.users[1 - d.user];
                    local.mirror.dialog(peer).map_or(0, |d| d.top_message_id)
                };
                if max_id == 0 {
                    self.tally.idle += 1;
                    return Ok(());
                }
                d.client
                    .messages()
                    .received_messages(ReceivedMessagesRequest { max_id })
                    .await
                    .with_context(|| format!("operation {i}: received"))?;
                self.tally.receipts += 1;
            }
            Op::Toggle {
                device,
                by_difference,
            } => {
                let d = &mut self.devices[device];
                if d.online.is_some() {
                    d.go_offline().await?;
                    self.tally.cuts += 1;
                } else {
                    d.go_online(by_difference).await?;
                    if by_difference {
                        self.tally.reopened_after_difference += 1;
                    } else {
                        self.tally.reopened_on_stream += 1;
                    }
                }
            }
            Op::CatchUp { device } => {
                let d = &mut self.devices[device];
                if d.online.is_some() {
                    self.tally.idle += 1;
                } else {
                    d.catch_up().await?;
                    self.tally.offline_catch_ups += 1;
                }
            }
        }
        Ok(())
    }
}

/// The server's view of a user: `GetDialogs` and every dialog's `GetHistory`, paged through.
struct ServerView {
    pts: i32,
    dialogs: Vec<Dialog>,
    histories: BTreeMap<i64, Vec<Message>>,
}

async fn server_view(client: &TestClient) -> anyhow::Result<ServerView> {
    let pts = client.get_state().await?.pts;
    let mut dialogs = Vec::new();
    let mut request = GetDialogsRequest {
        // One per page: the paging is part of what is compared.
        limit: 1,
        ..GetDialogsRequest::default()
    };
    loop {
        let page = client.get_dialogs(request).await?.dialogs;
        let Some(last) = page.last() else { break };
        request = GetDialogsRequest {
            offset_date: last.top_message_date,
            offset_id: last.top_message_id,
            offset_peer: last.peer,
            offset_pinned: last.pinned,
            limit: 1,
            ..GetDialogsRequest::default()
        };
        dialogs.extend(page);
    }
    let mut histories = BTreeMap::new();
    for dialog in &dialogs {
        let mut history: Vec<Message> = Vec::new();
        loop {
            let page = client
                .get_history(GetHistoryRequest {
                    peer: Some(InputPeer::user(dialog.peer_user())),
                    offset_id: history.last().map_or(0, |m| m.id),
                    limit: 50,
                    ..GetHistoryRequest::default()
                })
                .await?
                .messages;
            if page.is_empty() {
                break;
            }
            history.extend(page);
        }
        histories.insert(dialog.peer_user(), history);
    }
    Ok(ServerView {
        pts,
        dialogs,
        histories,
    })
}

/// How a device's copy differs from the server's view, if it does.
fn mismatch(device: usize, local: &Local, server: &ServerView) -> Option<String> {
    if local.pts != server.pts {
        return Some(format!(
            "device {device} is at pts {}, its account at {}",
            local.pts, server.pts
        ));
    }
    let dialogs = local.mirror.dialogs();
    if dialogs != server.dialogs {
        return Some(format!(
            "device {device}'s dialogs\n  {dialogs:?}\nthe server's\n  {:?}",
            server.dialogs
        ));
    }
    for (peer, history) in &server.histories {
        let mine: Vec<Message> = local.mirror.history(*peer).iter().map(compared).collect();
        let history: Vec<Message> = history.iter().map(compared).collect();
        if mine != history {
            let first = mine
                .iter()
                .zip(&history)
                .find(|(a, b)| a != b)
                .map(|(a, b)| format!("first difference: {a:?} / {b:?}"))
                .unwrap_or_default();
            return Some(format!(
                "device {device}'s history with {peer}: {} messages, the server's {}; {first}",
                mine.len(),
                history.len()
            ));
        }
    }
    None
}

/// The server's view checked against itself: history newest first without repeats, each
/// dialog's top message its newest, its unread count the incoming messages above its read
/// watermark.
fn check_server(user: usize, server: &ServerView) -> anyhow::Result<()> {
    for d in &server.dialogs {
        let history = server
            .histories
            .get(&d.peer_user())
            .context("a dialog without history")?;
        anyhow::ensure!(
            history.windows(2).all(|w| w[0].id > w[1].id),
            "user {user}: history with {} repeats or is out of order",
            d.peer_user()
        );
        anyhow::ensure!(
            history.first().map(|m| (m.id, m.date)) == Some((d.top_message_id, d.top_message_date)),
            "user {user}: the top message of {:?} is not its newest",
            d
        );
        let unread = history
            .iter()
            .filter(|m| !m.out && m.id > d.read_inbox_max_id)
            .count();
        anyhow::ensure!(
            usize::try_from(d.unread_count)? == unread,
            "user {user}: {d:?} counts {} unread, its history {unread}",
            d.unread_count
        );
    }
    Ok(())
}

/// Nothing in `deleted` (ids the user's devices saw deleted) is found again: not by
/// `GetMessages`, not in the server's history, and not by search, whose two queries (every
/// text and caption of the run holds one of them) find exactly the messages of the history
/// that have one (a file may have none): deletes and edits are searched as they are now.
async fn deleted_stay_deleted(
    client: &TestClient,
    server: &ServerView,
    deleted: &BTreeSet<i64>,
) -> anyhow::Result<()> {
    let ids: Vec<i64> = deleted.iter().copied().collect();
    for chunk in ids.chunks(200) {
        let found = client
            .messages()
            .get_messages(GetMessagesRequest {
                ids: chunk.to_vec(),
            })
            .await?
            .into_inner()
            .messages;
        anyhow::ensure!(
            found.is_empty(),
            "GetMessages found deleted messages: {:?}",
            found.iter().map(|m| m.id).collect::<Vec<_>>()
        );
    }
    let history: BTreeSet<i64> = server.histories.values().flatten().map(|m| m.id).collect();
    anyhow::ensure!(
        history.is_disjoint(deleted),
        "history holds deleted messages {:?}",
        history.intersection(deleted).collect::<Vec<_>>()
    );
    let texts: BTreeSet<i64> = server
        .histories
        .values()
        .flatten()
        .filter(|m| !m.text.is_empty())
        .map(|m| m.id)
        .collect();
    let mut found = BTreeSet::new();
    for q in ["from device", "edited by"] {
        let mut offset_id = 0;
        loop {
            let page = client
                .messages()
                .search(SearchRequest {
                    q: q.into(),
                    offset_id,
                    limit: 100,
                    ..SearchRequest::default()
                })
                .await?
                .into_inner();
            found.extend(page.messages.iter().map(|m| m.id));
            if page.next_offset_id == 0 {
                break;
            }
            offset_id = page.next_offset_id;
        }
    }
    anyhow::ensure!(
        found == texts,
        "search found {} messages, history holds {} with a text; deleted among them: {:?}",
        found.len(),
        texts.len(),
        found.intersection(deleted).collect::<Vec<_>>()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_device_converges_on_the_servers_state() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let (alice, alice_id) = system
        .user_on_devices::<DEVICES_PER_USER>("15559501", "Alice")
        .await?;
    let (bob, bob_id) = system
        .user_on_devices::<DEVICES_PER_USER>("15559502", "Bob")
        .await?;
    let mut devices: Vec<Device> = alice.into_iter().map(|c| Device::new(c, 0)).collect();
    devices.extend(bob.into_iter().map(|c| Device::new(c, 1)));
    // The last device of each user starts offline.
    for (i, d) in devices.iter_mut().enumerate() {
        if i % DEVICES_PER_USER != DEVICES_PER_USER - 1 {
            d.go_online(false).await?;
        }
    }
    let mut run = Run {
        devices,
        users: [alice_id, bob_id],
        tally: Tally::default(),
    };

    let mut rng = StdRng::seed_from_u64(SEED);
    let ops: Vec<Op> = (0..OPERATIONS).map(|_| draw(&mut rng)).collect();
    for (i, op) in ops.into_iter().enumerate() {
        run.run(i, op)
            .await
            .with_context(|| format!("operation {i}: {op:?}"))?;
    }
    eprintln!("convergence: seed {SEED:#x}, {:?}", run.tally);
    let t = &run.tally;
    anyhow::ensure!(
        t.sent > 50
            && t.edits > 20
            && t.media_sent > 10
            && t.photos_sent > 3
            && t.media_edits > 8
            && t.file_edits > 4
            && t.forwards > 5
            && t.deletes > 10
            && t.revokes > 3
            && t.clears > 0
            && t.replies > 10
            && t.reads > 10
            && t.receipts > 5
            && t.cuts > 5
            && t.reopened_after_difference > 3
            && t.offline_catch_ups > 3,
        "the seed drew too little of something: {t:?}"
    );

    // Everyone back: half of the offline devices by getDifference first.
    for (i, d) in run.devices.iter_mut().enumerate() {
        d.go_online(i % 2 == 0).await?;
    }
    let deadline = Instant::now() + SETTLE;
    loop {
        let mut first_mismatch = None;
        for user in 0..2 {
            let server = server_view(&run.devices[user * DEVICES_PER_USER].client).await?;
            for (i, d) in run.devices.iter().enumerate() {
                if d.user == user && first_mismatch.is_none() {
                    first_mismatch = mismatch(i, &lock(&d.local), &server);
                }
            }
        }
        let Some(why) = first_mismatch else { break };
        anyhow::ensure!(
            Instant::now() < deadline,
            "not converged within {SETTLE:?}: {why}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let (mut messages, mut deletions, mut files) = (0, 0, 0);
    for user in 0..2 {
        let server = server_view(&run.devices[user * DEVICES_PER_USER].client).await?;
        check_server(user, &server)?;
        // A copy loaded from the same calls (a new device, or one after `too_long`) pages
        // through them to the same state.
        let loaded = Mirror::load(&run.devices[user * DEVICES_PER_USER].client).await?;
        let reloaded = Local {
            mirror: loaded,
            pts: server.pts,
            ..Local::default()
        };
        if let Some(why) = mismatch(user * DEVICES_PER_USER, &reloaded, &server) {
            anyhow::bail!("a loaded copy differs: {why}");
        }
        messages += server.histories.values().map(Vec::len).sum::<usize>();
        files += server
            .histories
            .values()
            .flatten()
            .filter(|m| m.media.is_some())
            .count();
        let deleted: BTreeSet<i64> = run
            .devices
            .iter()
            .filter(|d| d.user == user)
            .flat_map(|d| lock(&d.local).deleted.clone())
            .collect();
        deleted_stay_deleted(
            &run.devices[user * DEVICES_PER_USER].client,
            &server,
            &deleted,
        )
        .await
        .with_context(|| format!("user {user}"))?;
        deletions += deleted.len();
    }
    for (i, d) in run.devices.iter_mut().enumerate() {
        d.go_offline().await?;
        let local = lock(&d.local);
        assert_eq!(local.breaks, 0, "device {i} applied its log with holes");
        assert_eq!(d.discontinuities, 0, "device {i} met holes in the log");
        let stats = local.mirror.stats();
        assert_eq!(
            (stats.duplicates, stats.unknown_edits, stats.empty),
            (0, 0, 0),
            "device {i} met a message twice or an edit of one it never had: {stats:?}"
        );
        assert_eq!(
            local.pts, d.saved.pts,
            "device {i} saved the pts it applied"
        );
    }
    eprintln!(
        "convergence: {messages} messages ({files} with a file) and {deletions} deleted in both accounts, every device equal"
    );
    // The comparison met files: every device held them as the server does.
    anyhow::ensure!(files > 5, "too few files left to compare: {files}");
    Ok(())
}
