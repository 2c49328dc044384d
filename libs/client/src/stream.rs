//! The update stream a client reads: updates in pts order, each once, across gaps (filled by
//! getDifference), `DifferenceNeeded`, and lost connections (reopened with backoff from the
//! local state).

use std::{collections::VecDeque, time::Duration};

use oxigram_proto::{
    api::v1::{
        AffectedMessages, EditMessageResponse, SendMessageResponse, StreamEvent, stream_event,
    },
    types::v1::{PtsUpdate, User},
};
use tokio::{sync::mpsc, time::Instant};
use tonic::{Status, Streaming};

use crate::{
    CatchUp, Client, Error, Sequencer, Source, State, StatusChange, Typing, Verdict,
    deleted_update, edited_update, sent_update,
};

/// How an [`UpdateStream`] waits and retries.
#[derive(Clone, Copy, Debug)]
pub struct StreamOptions {
    /// How long a gap may stay open before getDifference fills it: pushes of one account may
    /// overtake each other, so the missing update usually arrives a moment later.
    pub gap_wait: Duration,
    /// The wait before reopening a lost stream; it doubles after each failed attempt...
    pub first_retry: Duration,
    /// ...up to this.
    pub max_retry: Duration,
    /// Reopening attempts before giving up (`None`: never give up).
    pub max_reconnects: Option<u64>,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            gap_wait: Duration::from_secs(1),
            first_retry: Duration::from_millis(200),
            max_retry: Duration::from_secs(5),
            max_reconnects: None,
        }
    }
}

/// An update the stream applied, and how it arrived.
#[derive(Clone, Debug)]
pub struct Applied {
    pub update: PtsUpdate,
    pub source: Source,
}

/// What happened to the stream, in order.
#[derive(Debug)]
pub enum Event {
    /// The next update in pts order.
    Update(Applied),
    /// An update arrived with `received` beyond the local pts `local`: the ones between are
    /// awaited, then fetched.
    Gap { local: i32, received: i32 },
    /// The log no longer holds what the device missed: the state jumped to `pts`; reload
    /// dialogs and history.
    TooLong { pts: i32 },
    /// The stream was reopened from `pts`.
    Resumed { pts: i32 },
    /// The gateway is catching up as many devices as it takes at once, or shed the opening
    /// or the getDifference with `FLOOD_WAIT_X`: the call is made again after `retry_in`,
    /// from the same pts. Not a failure.
    Paced { retry_in: Duration },
    /// Something failed; the stream carries on (reconnecting, or retrying the catch-up after
    /// another gap wait).
    Failed { during: During, error: Error },
    /// Transient, outside the pts order: a peer is typing (or cancelled); show it until its
    /// `expires_at`.
    Typing(Typing),
    /// Transient: a user's presence changed.
    Status(StatusChange),
    /// Transient: a user the account shows (a contact, either way, or a dialog's peer)
    /// changed her profile; the user as the account may see her, without a status.
    User(User),
}

/// Which part of the stream's work failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum During {
    /// The open stream broke or ended.
    Stream,
    /// Reopening it.
    Reconnect,
    /// getDifference.
    CatchUp,
}

/// Counters of the stream's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Reopening attempts.
    pub reconnects: u64,
    /// Gaps filled by getDifference after their wait.
    pub gap_fills: u64,
    /// Times the gateway said too much was missing to replay.
    pub difference_needed: u64,
    pub too_long: u64,
    /// Times the gateway turned a reopening away with a wait (a reconnect storm).
    pub paced: u64,
    /// See [`Sequencer::discontinuities`].
    pub discontinuities: u64,
}

/// Feeds the answers to this device's own sends into its update stream, from any task.
#[derive(Clone, Debug)]
pub struct SentUpdates(mpsc::UnboundedSender<PtsUpdate>);

impl SentUpdates {
    /// The send's own update joins the stream, applied in its pts order.
    pub fn answer(&self, response: SendMessageResponse) {
        if let Some(update) = sent_update(response) {
            // The stream may be gone: then nobody needs the update.
            let _ = self.0.send(update);
        }
    }

    /// The edit's own update joins the stream, applied in its pts order.
    pub fn answer_edit(&self, response: EditMessageResponse) {
        if let Some(update) = edited_update(response) {
            let _ = self.0.send(update);
        }
    }

    /// The delete's own update (of the ids it asked to delete) joins the stream.
    pub fn answer_delete(&self, requested: &[i64], response: AffectedMessages) {
        if let Some(update) = deleted_update(requested, response) {
            let _ = self.0.send(update);
        }
    }

    /// A settings call's answer, its own update, joins the stream (pts 0: it comes by
    /// getDifference).
    pub fn answer_setting(&self, update: PtsUpdate) {
        if update.pts > 0 {
            let _ = self.0.send(update);
        }
    }
}

/// A device's update stream: open it at the device's saved state, then call
/// [`next`](Self::next) for ever; persist [`state`](Self::state) to resume after a restart.
pub struct UpdateStream {
    client: Client,
    seq: Sequencer,
    options: StreamOptions,
    stream: Option<Streaming<StreamEvent>>,
    stopped: bool,
    retry_at: Instant,
    retry_delay: Duration,
    /// A getDifference the gateway paced: due again at this instant.
    catch_up_at: Option<Instant>,
    sent_tx: mpsc::UnboundedSender<PtsUpdate>,
    sent_rx: mpsc::UnboundedReceiver<PtsUpdate>,
    ready: VecDeque<Event>,
    delivered: State,
    stats: StreamStats,
}

impl UpdateStream {
    /// Opens the stream at `state` (pts 0: only what happens from now on). An opening the
    /// gateway sheds with `FLOOD_WAIT_X` is no failure: the stream starts with
    /// [`Event::Paced`] and opens after the wait.
    pub async fn open(client: Client, state: State, options: StreamOptions) -> Result<Self, Error> {
        let (stream, paced) = match client.open_stream(state.pts).await {
            Ok(stream) => (Some(stream), None),
            Err(error) => (None, Some(error.flood_wait().ok_or(error)?)),
        };
        let (sent_tx, sent_rx) = mpsc::unbounded_channel();
        let mut this = Self {
            client,
            seq: Sequencer::new(state),
            options,
            stream,
            stopped: false,
            retry_at: Instant::now(),
            retry_delay: options.first_retry,
            catch_up_at: None,
            sent_tx,
            sent_rx,
            ready: VecDeque::new(),
            delivered: state,
            stats: StreamStats::default(),
        };
        if let Some(wait) = paced {
            this.retry_at = this.flood_waited(wait);
        }
        Ok(this)
    }

    /// Counts and reports a wait the gateway asked for; the instant to try again.
    fn paced(&mut self, retry_in: Duration) -> Instant {
        self.stats.paced += 1;
        self.ready.push_back(Event::Paced { retry_in });
        Instant::now() + retry_in
    }

    /// [`paced`](Self::paced) for a `FLOOD_WAIT_X`: whole seconds, the same for every device
    /// shed at once, so each waits a little more, drawn at random, and they do not all come
    /// back together. (A `RetryAfter` is jittered by the gateway already.)
    fn flood_waited(&mut self, wait: Duration) -> Instant {
        let jitter = wait.as_millis().min(u64::MAX as u128) as u64 / 2;
        self.paced(wait + Duration::from_millis(rand::random_range(0..=jitter)))
    }

    /// The state after every event returned so far: what to save.
    pub fn state(&self) -> State {
        self.delivered
    }

    pub fn stats(&self) -> StreamStats {
        StreamStats {
            discontinuities: self.seq.discontinuities(),
            ..self.stats
        }
    }

    /// A handle for the tasks that send as this device.
    pub fn sent(&self) -> SentUpdates {
        SentUpdates(self.sent_tx.clone())
    }

    /// The answer to this device's own send, applied in its pts order.
    pub fn answer(&mut self, response: SendMessageResponse) {
        if let Some(update) = sent_update(response) {
            self.offer(update, Source::Sent);
        }
    }

    /// The answer to this device's own edit, applied in its pts order (the device gets no
    /// push of it).
    pub fn answer_edit(&mut self, response: EditMessageResponse) {
        if let Some(update) = edited_update(response) {
            self.offer(update, Source::Sent);
        }
    }

    /// The answer to a settings call of this device (its own update), applied in its pts
    /// order; pts 0 (not logged in time) comes by getDifference.
    pub fn answer_setting(&mut self, update: PtsUpdate) {
        if update.pts > 0 {
            self.offer(update, Source::Sent);
        }
    }

    /// The answer to this device's own delete of `requested`, applied in its pts order.
    pub fn answer_delete(&mut self, requested: &[i64], response: AffectedMessages) {
        if let Some(update) = deleted_update(requested, response) {
            self.offer(update, Source::Sent);
        }
    }

    /// The next event. Cancel-safe: no update is lost when the call is abandoned (an
    /// interrupted catch-up resumes from what it applied).
    pub async fn next(&mut self) -> Event {
        loop {
            if let Some(event) = self.try_next() {
                return event;
            }
            let gap_due = self.seq.gap_since().map(|t| t + self.options.gap_wait);
            let retry_due = self.may_reconnect().then_some(self.retry_at);
            // A paced getDifference is retried when the gateway said, before any gap wait.
            let catch_up_due = self.catch_up_at.or(gap_due);
            tokio::select! {
                Some(update) = self.sent_rx.recv() => self.offer(update, Source::Sent),
                event = next_event(&mut self.stream) => self.on_event(event).await,
                () = sleep_until(catch_up_due) => {
                    if self.catch_up_at.take().is_none() {
                        self.stats.gap_fills += 1;
                    }
                    self.catch_up().await;
                }
                () = sleep_until(retry_due) => self.reconnect().await,
            }
        }
    }

    /// An event already decided, without waiting.
    pub fn try_next(&mut self) -> Option<Event> {
        let event = self.ready.pop_front()?;
        match &event {
            Event::Update(a) => {
                self.delivered.pts = a.update.pts;
                self.delivered.date = self.delivered.date.max(a.update.date);
            }
            Event::TooLong { pts } => self.delivered.pts = *pts,
            _ => {}
        }
        Some(event)
    }

    /// getDifference until caught up; what it applies is queued for
    /// [`next`](Self::next)/[`try_next`](Self::try_next), a failure too.
    pub async fn catch_up(&mut self) {
        let ready = &mut self.ready;
        let outcome = self
            .client
            .catch_up(&mut self.seq, |update, source| {
                ready.push_back(Event::Update(Applied { update, source }))
            })
            .await;
        match outcome {
            Ok(CatchUp::Done) => {}
            Ok(CatchUp::TooLong { pts }) => {
                self.stats.too_long += 1;
                self.ready.push_back(Event::TooLong { pts });
            }
            Err(error) => match error.flood_wait() {
                Some(wait) => self.catch_up_at = Some(self.flood_waited(wait)),
                None => {
                    self.seq.restart_gap_wait();
                    self.ready.push_back(Event::Failed {
                        during: During::CatchUp,
                        error,
                    });
                }
            },
        }
    }

    /// Closes the stream for good and applies the answers to own sends handed in so far;
    /// [`catch_up`](Self::catch_up) and [`try_next`](Self::try_next) still work.
    pub fn stop(&mut self) {
        self.stopped = true;
        self.stream = None;
        while let Ok(update) = self.sent_rx.try_recv() {
            self.offer(update, Source::Sent);
        }
    }

    fn offer(&mut self, update: PtsUpdate, source: Source) {
        let (local, received, gap_before) = (self.seq.state().pts, update.pts, self.seq.pending());
        let ready = &mut self.ready;
        let verdict = self.seq.offer(update, source, |update, source| {
            ready.push_back(Event::Update(Applied { update, source }))
        });
        if verdict == Verdict::Gap && gap_before == 0 {
            self.ready.push_back(Event::Gap { local, received });
        }
    }

    async fn on_event(&mut self, event: Result<Option<StreamEvent>, Status>) {
        let error = match event {
            Ok(Some(StreamEvent { kind })) => {
                match kind {
                    Some(stream_event::Kind::Update(u)) => self.offer(u, Source::Stream),
                    Some(stream_event::Kind::DifferenceNeeded(_)) => {
                        self.stats.difference_needed += 1;
                        self.catch_up().await;
                    }
                    Some(stream_event::Kind::UserTyping(t)) => self
                        .ready
                        .push_back(Event::Typing(Typing::arrived(t, Instant::now()))),
                    // The replay's end: what follows is live; the cursor moves with updates.
                    Some(stream_event::Kind::CaughtUp(_)) => {}
                    Some(stream_event::Kind::RetryAfter(r)) => {
                        self.stream = None;
                        self.retry_at = self.paced(Duration::from_millis(r.retry_after_ms.into()));
                    }
                    Some(stream_event::Kind::UserStatus(s)) => {
                        self.ready.push_back(Event::Status(StatusChange {
                            user_id: s.user_id,
                            status: s.status,
                        }))
                    }
                    Some(stream_event::Kind::User(u)) => {
                        if let Some(user) = u.user {
                            self.ready.push_back(Event::User(user));
                        }
                    }
                    None => {}
                }
                return;
            }
            Ok(None) => Error::StreamEnded,
            Err(status) => Error::Status(status),
        };
        self.ready.push_back(Event::Failed {
            during: During::Stream,
            error,
        });
        self.stream = None;
        self.retry_delay = self.options.first_retry;
        self.retry_at = Instant::now() + self.retry_delay;
    }

    fn may_reconnect(&self) -> bool {
        self.stream.is_none()
            && !self.stopped
            && self
                .options
                .max_reconnects
                .is_none_or(|max| self.stats.reconnects < max)
    }

    async fn reconnect(&mut self) {
        self.stats.reconnects += 1;
        let pts = self.seq.state().pts;
        match self.client.open_stream(pts).await {
            Ok(stream) => {
                self.stream = Some(stream);
                self.retry_delay = self.options.first_retry;
                self.ready.push_back(Event::Resumed { pts });
            }
            Err(error) => match error.flood_wait() {
                Some(wait) => self.retry_at = self.flood_waited(wait),
                None => {
                    self.ready.push_back(Event::Failed {
                        during: During::Reconnect,
                        error,
                    });
                    self.retry_delay = (self.retry_delay * 2).min(self.options.max_retry);
                    self.retry_at = Instant::now() + self.retry_delay;
                }
            },
        }
    }
}

async fn next_event(
    stream: &mut Option<Streaming<StreamEvent>>,
) -> Result<Option<StreamEvent>, Status> {
    match stream {
        Some(s) => s.message().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
