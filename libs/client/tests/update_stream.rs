//! `UpdateStream` against a scripted Updates service: the stream drops an update and ends, the
//! client reopens it from its state, the gateway answers `DifferenceNeeded`, and the client
//! catches up slice by slice, applying every update once, in pts order; a reopening the
//! gateway paces (a reconnect storm) comes back after the wait it was given.

use std::{
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::{Stream, StreamExt, stream};
use oxigram_client::{
    AUTH_KEY_HEADER, AuthKey, Client, During, Event, Source, State, StreamOptions, UpdateStream,
};
use oxigram_proto::{
    api::v1::{
        AckRequest, DeviceState, Difference, DifferenceNeeded, GetDeviceStateRequest,
        GetDifferenceRequest, GetStateRequest, RetryAfter, StreamEvent, StreamRequest,
        stream_event,
        updates_server::{Updates, UpdatesServer},
    },
    types::v1::{PtsUpdate, UpdatesState},
};
use tonic::{Request, Response, Status};

/// The account's log: pts 1..=LOG, one update each.
const LOG: i32 = 6;
/// The scripted gateway's getDifference slice.
const SLICE: i32 = 2;
const KEY: &str = "7:abcd";

#[derive(Default)]
struct Scripted {
    opens: AtomicUsize,
    /// The pts each opening asked for, and when.
    opened_at: Arc<Mutex<Vec<i32>>>,
    opened_when: Arc<Mutex<Vec<std::time::Instant>>>,
    /// The second opening is told to come back after this many ms.
    pace_second_open: Option<u32>,
    /// Attempts to open (counting the shed ones) that are shed with `FLOOD_WAIT_1`.
    shed_opens: Vec<usize>,
    open_attempts: AtomicUsize,
    /// The first so many getDifference calls are shed with `FLOOD_WAIT_1`.
    shed_differences: AtomicUsize,
    differences_when: Arc<Mutex<Vec<std::time::Instant>>>,
}

fn shed() -> Status {
    oxigram_errors::Error::new(oxigram_errors::ErrorCode::FloodWait(1), "overloaded").into()
}

fn update(pts: i32) -> PtsUpdate {
    PtsUpdate {
        pts,
        pts_count: 1,
        date: 1000 + i64::from(pts),
        update: None,
    }
}

fn signed<T>(request: &Request<T>) -> Result<(), Status> {
    match request.metadata().get(AUTH_KEY_HEADER) {
        Some(v) if v == KEY => Ok(()),
        _ => Err(Status::unauthenticated("AUTH_KEY_INVALID")),
    }
}

type Events = Pin<Box<dyn Stream<Item = Result<StreamEvent, Status>> + Send>>;

#[tonic::async_trait]
impl Updates for Scripted {
    async fn get_state(
        &self,
        request: Request<GetStateRequest>,
    ) -> Result<Response<UpdatesState>, Status> {
        signed(&request)?;
        Ok(Response::new(UpdatesState { pts: LOG, date: 0 }))
    }

    async fn get_difference(
        &self,
        request: Request<GetDifferenceRequest>,
    ) -> Result<Response<Difference>, Status> {
        signed(&request)?;
        if let Ok(mut when) = self.differences_when.lock() {
            when.push(std::time::Instant::now());
        }
        let left = self.shed_differences.load(Ordering::SeqCst);
        if left > 0 {
            self.shed_differences.store(left - 1, Ordering::SeqCst);
            return Err(shed());
        }
        let from = request.into_inner().pts;
        let to = (from + SLICE).min(LOG);
        Ok(Response::new(Difference {
            updates: (from + 1..=to).map(update).collect(),
            state: Some(UpdatesState { pts: to, date: 0 }),
            is_slice: to < LOG,
            ..Default::default()
        }))
    }

    type StreamStream = Events;

    /// The first opening pushes the log without pts 2, then ends; later ones say too much is
    /// missing and stay open.
    async fn stream(&self, request: Request<StreamRequest>) -> Result<Response<Events>, Status> {
        signed(&request)?;
        let attempt = self.open_attempts.fetch_add(1, Ordering::SeqCst);
        if self.shed_opens.contains(&attempt) {
            return Err(shed());
        }
        if let Ok(mut at) = self.opened_at.lock() {
            at.push(request.get_ref().pts);
        }
        if let Ok(mut when) = self.opened_when.lock() {
            when.push(std::time::Instant::now());
        }
        let event = |kind| Ok(StreamEvent { kind: Some(kind) });
        let opens = self.opens.fetch_add(1, Ordering::SeqCst);
        let events: Events = if let (1, Some(ms)) = (opens, self.pace_second_open) {
            let paced = event(stream_event::Kind::RetryAfter(RetryAfter {
                retry_after_ms: ms,
            }));
            Box::pin(stream::iter([paced]))
        } else if opens == 0 {
            let pushed = [1, 3, 4, 5, 6].map(|pts| event(stream_event::Kind::Update(update(pts))));
            Box::pin(stream::iter(pushed))
        } else {
            let needed = event(stream_event::Kind::DifferenceNeeded(DifferenceNeeded {}));
            Box::pin(stream::iter([needed]).chain(stream::pending()))
        };
        Ok(Response::new(events))
    }

    async fn ack(&self, _: Request<AckRequest>) -> Result<Response<DeviceState>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn get_device_state(
        &self,
        _: Request<GetDeviceStateRequest>,
    ) -> Result<Response<DeviceState>, Status> {
        Err(Status::unimplemented("not scripted"))
    }
}

/// A client of the scripted gateway at `address`, with the test key.
async fn client_of(address: String) -> Result<Client, Box<dyn std::error::Error>> {
    let key = AuthKey {
        id: 7,
        secret: "abcd".into(),
    };
    Ok(Client::new(oxigram_client::connect(&address).await?, key)?
        .with_deadline(Duration::from_secs(5)))
}

/// Serves `scripted` on a free port; returns its address.
async fn serve(scripted: Scripted) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = format!("http://{}", listener.local_addr()?);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(UpdatesServer::new(scripted))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    Ok(address)
}

#[tokio::test]
async fn resumes_after_a_lost_stream_and_catches_up_in_slices()
-> Result<(), Box<dyn std::error::Error>> {
    let scripted = Scripted::default();
    let opened_at = scripted.opened_at.clone();
    let client = client_of(serve(scripted).await?).await?;
    let options = StreamOptions {
        // Long enough that only the reconnection and DifferenceNeeded fill the gap.
        gap_wait: Duration::from_secs(30),
        first_retry: Duration::from_millis(10),
        ..StreamOptions::default()
    };
    let mut updates = UpdateStream::open(client, State::default(), options).await?;

    let mut applied = Vec::new();
    let mut seen = Vec::new();
    while applied.len() < LOG as usize {
        let event = tokio::time::timeout(Duration::from_secs(10), updates.next()).await?;
        match event {
            Event::Update(a) => applied.push((a.update.pts, a.source)),
            Event::Gap { local, received } => seen.push(format!("gap {local}->{received}")),
            Event::Resumed { pts } => seen.push(format!("resumed at {pts}")),
            Event::Failed { during, error } => {
                assert_eq!(during, During::Stream, "{error}");
                seen.push(format!("failed: {}", error.code()));
            }
            Event::TooLong { pts } => seen.push(format!("too long at {pts}")),
            Event::Paced { .. } => seen.push("paced".into()),
            Event::Typing(_) | Event::Status(_) | Event::User(_) => {}
        }
    }
    let d = Source::Difference;
    assert_eq!(
        applied,
        [(1, Source::Stream), (2, d), (3, d), (4, d), (5, d), (6, d)]
    );
    assert_eq!(seen, ["gap 1->3", "failed: ENDED", "resumed at 1"]);
    assert_eq!(opened_at.lock().map(|v| v.clone()).ok(), Some(vec![0, 1]));
    assert_eq!(
        updates.state(),
        State {
            pts: LOG,
            date: 1000 + i64::from(LOG)
        }
    );
    let stats = updates.stats();
    assert_eq!(
        (
            stats.reconnects,
            stats.difference_needed,
            stats.gap_fills,
            stats.discontinuities
        ),
        (1, 1, 0, 0)
    );
    Ok(())
}

#[tokio::test]
async fn a_gap_is_filled_after_its_wait() -> Result<(), Box<dyn std::error::Error>> {
    let address = serve(Scripted::default()).await?;
    let key = AuthKey {
        id: 7,
        secret: "abcd".into(),
    };
    let client = Client::new(oxigram_client::connect(&address).await?, key)?;
    let options = StreamOptions {
        gap_wait: Duration::from_millis(20),
        // The stream ends after its pushes: no reopening before the gap wait is over.
        first_retry: Duration::from_secs(30),
        ..StreamOptions::default()
    };
    let mut updates = UpdateStream::open(client, State::default(), options).await?;
    let mut applied = Vec::new();
    while applied.len() < LOG as usize {
        if let Event::Update(a) =
            tokio::time::timeout(Duration::from_secs(10), updates.next()).await?
        {
            applied.push(a.update.pts);
        }
    }
    assert_eq!(applied, [1, 2, 3, 4, 5, 6]);
    let stats = updates.stats();
    assert_eq!((stats.gap_fills, stats.reconnects), (1, 0));
    Ok(())
}

#[tokio::test]
async fn an_unknown_key_is_refused_with_its_code() -> Result<(), Box<dyn std::error::Error>> {
    let address = serve(Scripted::default()).await?;
    let key = AuthKey {
        id: 8,
        secret: "abcd".into(),
    };
    let client = Client::new(oxigram_client::connect(&address).await?, key)?;
    let refused = client.get_state().await.map(|_| ()).map_err(|e| e.code());
    assert_eq!(refused, Err("GRPC_Unauthenticated".to_owned()));
    Ok(())
}

#[tokio::test]
async fn a_paced_reopening_comes_back_after_its_wait_not_as_a_failure()
-> Result<(), Box<dyn std::error::Error>> {
    let scripted = Scripted {
        pace_second_open: Some(300),
        ..Scripted::default()
    };
    let (opened_at, opened_when) = (scripted.opened_at.clone(), scripted.opened_when.clone());
    let client = client_of(serve(scripted).await?).await?;
    let options = StreamOptions {
        gap_wait: Duration::from_secs(30),
        first_retry: Duration::from_millis(10),
        ..StreamOptions::default()
    };
    let mut updates = UpdateStream::open(client, State::default(), options).await?;
    let mut seen = Vec::new();
    let mut applied = 0;
    while applied < LOG {
        let event = tokio::time::timeout(Duration::from_secs(10), updates.next()).await?;
        match event {
            Event::Update(_) => applied += 1,
            Event::Paced { retry_in } => seen.push(format!("paced {} ms", retry_in.as_millis())),
            Event::Resumed { pts } => seen.push(format!("resumed at {pts}")),
            Event::Failed { error, .. } => seen.push(format!("failed: {}", error.code())),
            _ => {}
        }
    }
    assert_eq!(
        seen,
        [
            "failed: ENDED",
            "resumed at 1",
            "paced 300 ms",
            "resumed at 1"
        ]
    );
    assert_eq!(
        opened_at.lock().map(|v| v.clone()).ok(),
        Some(vec![0, 1, 1])
    );
    let when = opened_when.lock().map(|v| v.clone()).unwrap_or_default();
    assert_eq!(when.len(), 3);
    let waited = when[2] - when[1];
    assert!(
        waited >= Duration::from_millis(300),
        "reopened after {waited:?}, before the 300 ms it was given"
    );
    assert_eq!(updates.stats().paced, 1);
    Ok(())
}

#[tokio::test]
async fn openings_and_a_difference_shed_with_flood_wait_come_back_after_the_wait()
-> Result<(), Box<dyn std::error::Error>> {
    let scripted = Scripted {
        // The first opening, and the first reopening after the stream ends.
        shed_opens: vec![0, 2],
        shed_differences: AtomicUsize::new(1),
        ..Scripted::default()
    };
    let (opened_at, differences_when) = (
        scripted.opened_at.clone(),
        scripted.differences_when.clone(),
    );
    let client = client_of(serve(scripted).await?).await?;
    let options = StreamOptions {
        // Far longer than the test: only the gateway's wait brings the catch-up back.
        gap_wait: Duration::from_secs(60),
        first_retry: Duration::from_millis(10),
        ..StreamOptions::default()
    };
    let mut updates = UpdateStream::open(client, State::default(), options).await?;
    let mut seen = Vec::new();
    let mut applied = Vec::new();
    while applied.len() < LOG as usize {
        let event = tokio::time::timeout(Duration::from_secs(10), updates.next()).await?;
        match event {
            Event::Update(a) => applied.push(a.update.pts),
            Event::Paced { retry_in } => {
                assert!(
                    (Duration::from_secs(1)..=Duration::from_millis(1500)).contains(&retry_in),
                    "FLOOD_WAIT_1 with its jitter: {retry_in:?}"
                );
                seen.push("paced".to_owned());
            }
            Event::Resumed { pts } => seen.push(format!("resumed at {pts}")),
            Event::Failed { error, .. } => seen.push(format!("failed: {}", error.code())),
            _ => {}
        }
    }
    assert_eq!(applied, [1, 2, 3, 4, 5, 6]);
    assert_eq!(
        seen,
        [
            "paced",
            "resumed at 0",
            "failed: ENDED",
            "paced",
            "resumed at 1",
            "paced"
        ]
    );
    assert_eq!(opened_at.lock().map(|v| v.clone()).ok(), Some(vec![0, 1]));
    let when = differences_when
        .lock()
        .map(|v| v.clone())
        .unwrap_or_default();
    assert!(when.len() >= 2, "{when:?}");
    let waited = when[1] - when[0];
    assert!(
        waited >= Duration::from_secs(1),
        "the shed getDifference came back after {waited:?}, before its FLOOD_WAIT_1"
    );
    let stats = updates.stats();
    assert_eq!((stats.paced, stats.gap_fills), (3, 0));
    Ok(())
}
