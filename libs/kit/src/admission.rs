//! Admission control: a service takes at most so many requests at once, and past that sheds
//! the least urgent first, answering `RESOURCE_EXHAUSTED` with `FLOOD_WAIT_X` instead of
//! queueing until every call times out. Each request has a priority by its method:
//! - `persist` (a send, an edit: anything that writes) may use the whole ceiling;
//! - `sync` (getDifference, streams, reads) the first 80 % of it;
//! - `transient` (typing, presence) the first half.
//!
//! The ceiling itself adapts: a shed `persist` request halves it (down to a floor), and each
//! request answered raises it by one back up to the configured maximum, so after an overload a
//! service ramps back gradually instead of taking the whole storm again at once. Health
//! checks and reflection are never shed. `oxigram_admission_shed_total{service,priority}`
//! counts the refusals.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
};

use oxigram_errors::{Error, ErrorCode};
use prometheus_client::metrics::{counter::Counter, family::Family};
use tonic::body::Body;
use tower::{Layer, Service};

/// How urgent a request is; the lower, the later it is shed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Persist,
    Sync,
    Transient,
}

impl Priority {
    /// The priority of the RPC at `path` (`/package.Service/Method`); `None` for calls never
    /// shed (health, reflection).
    pub fn of(path: &str) -> Option<Self> {
        if path.starts_with("/grpc.") {
            return None;
        }
        let method = path.rsplit('/').next().unwrap_or_default();
        const TRANSIENT: [&str; 4] = ["Typing", "Status", "Transient", "Presence"];
        const SYNC: [&str; 7] = [
            "Get", "Stream", "Search", "Resolve", "Ack", "Export", "Check",
        ];
        if TRANSIENT.iter().any(|word| method.contains(word)) {
            Some(Self::Transient)
        } else if SYNC.iter().any(|prefix| method.starts_with(prefix)) {
            Some(Self::Sync)
        } else {
            Some(Self::Persist)
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Persist => "persist",
            Self::Sync => "sync",
            Self::Transient => "transient",
        }
    }

    /// The share of the ceiling this priority may fill, in percent.
    fn share_percent(self) -> usize {
        match self {
            Self::Persist => 100,
            Self::Sync => 80,
            Self::Transient => 50,
        }
    }
}

type Labels = Vec<(&'static str, String)>;

fn shed_counter() -> &'static Family<Labels, Counter> {
    static SHED: OnceLock<Family<Labels, Counter>> = OnceLock::new();
    SHED.get_or_init(|| {
        let family = Family::<Labels, Counter>::default();
        oxigram_telemetry::metrics::register(
            "admission_shed",
            "Requests refused with RESOURCE_EXHAUSTED/FLOOD_WAIT_X because the service was at its concurrency limit, by priority",
            family.clone(),
        );
        family
    })
}

/// What every copy of a service's admission layer shares.
#[derive(Debug)]
struct State {
    service: &'static str,
    max: usize,
    floor: usize,
    ceiling: AtomicUsize,
    in_flight: AtomicUsize,
}

/// Admission control for the service named `service`, at most `max_in_flight` requests at
/// once (0: no limit).
#[derive(Debug, Clone)]
pub struct AdmissionLayer {
    state: Option<Arc<State>>,
}

impl AdmissionLayer {
    pub fn new(service: &'static str, max_in_flight: usize) -> Self {
        let state = (max_in_flight > 0).then(|| {
            Arc::new(State {
                service,
                max: max_in_flight,
                floor: (max_in_flight / 8).max(1),
                ceiling: AtomicUsize::new(max_in_flight),
                in_flight: AtomicUsize::new(0),
            })
        });
        Self { state }
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admission {
            inner,
            state: self.state.clone(),
        }
    }
}

/// See [`AdmissionLayer`].
#[derive(Debug, Clone)]
pub struct Admission<S> {
    inner: S,
    state: Option<Arc<State>>,
}

/// One admitted request; gives its place back when its answer is made.
struct Admitted(Arc<State>);

impl Drop for Admitted {
    fn drop(&mut self) {
        let state = &self.0;
        state.in_flight.fetch_sub(1, Ordering::AcqRel);
        // Additive increase back to the maximum.
        let _ = state
            .ceiling
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                (c < state.max).then_some(c + 1)
            });
    }
}

impl State {
    /// A place for a request of `priority`, or `None` when it is shed.
    fn admit(self: &Arc<Self>, priority: Priority) -> Option<Admitted> {
        let ceiling = self.ceiling.load(Ordering::Acquire);
        let allowed = (ceiling * priority.share_percent() / 100).max(1);
        let taken = self.in_flight.fetch_add(1, Ordering::AcqRel);
        if taken < allowed {
            return Some(Admitted(self.clone()));
        }
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        if priority == Priority::Persist {
            // Multiplicative decrease: even the most urgent work is more than it can take.
            let _ = self
                .ceiling
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                    Some((c / 2).max(self.floor))
                });
        }
        shed_counter()
            .get_or_create(&vec![
                ("service", self.service.to_owned()),
                ("priority", priority.label().to_owned()),
            ])
            .inc();
        None
    }
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, ReqBody> Service<http::Request<ReqBody>> for Admission<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let (Some(state), Some(priority)) = (&self.state, Priority::of(request.uri().path()))
        else {
            return Box::pin(self.inner.call(request));
        };
        let Some(admitted) = state.admit(priority) else {
            let status: tonic::Status =
                Error::new(ErrorCode::FloodWait(1), "the service is overloaded; retry").into();
            return Box::pin(async move { Ok(status.into_http()) });
        };
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await;
            drop(admitted);
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_get_their_priority() {
        for (path, priority) in [
            (
                "/oxigram.api.v1.Messages/SendMessage",
                Some(Priority::Persist),
            ),
            (
                "/oxigram.messages.v1.Messages/SendMessage",
                Some(Priority::Persist),
            ),
            (
                "/oxigram.updates.v1.Updates/Append",
                Some(Priority::Persist),
            ),
            (
                "/oxigram.api.v1.Updates/GetDifference",
                Some(Priority::Sync),
            ),
            ("/oxigram.api.v1.Updates/Stream", Some(Priority::Sync)),
            (
                "/oxigram.api.v1.Messages/SetTyping",
                Some(Priority::Transient),
            ),
            (
                "/oxigram.gateway.v1.GatewayPush/PushTransient",
                Some(Priority::Transient),
            ),
            ("/grpc.health.v1.Health/Check", None),
        ] {
            assert_eq!(Priority::of(path), priority, "{path}");
        }
    }

    #[test]
    fn sheds_transient_then_sync_then_persist_and_ramps_back() {
        let AdmissionLayer { state: Some(state) } = AdmissionLayer::new("test", 10) else {
            panic!("a limited layer has state");
        };
        // Half the ceiling: transient calls are shed, the others still admitted.
        let mut held: Vec<Admitted> = (0..5)
            .map(|_| state.admit(Priority::Persist))
            .collect::<Option<_>>()
            .unwrap_or_default();
        assert_eq!(held.len(), 5);
        assert!(state.admit(Priority::Transient).is_none());
        held.extend(state.admit(Priority::Sync));
        held.extend(state.admit(Priority::Sync));
        held.extend(state.admit(Priority::Sync));
        // 80 %: sync is shed now, persist is not.
        assert!(state.admit(Priority::Sync).is_none());
        held.extend(state.admit(Priority::Persist));
        held.extend(state.admit(Priority::Persist));
        assert_eq!(held.len(), 10);
        // Full: persist is shed and the ceiling halves.
        assert!(state.admit(Priority::Persist).is_none());
        assert_eq!(state.ceiling.load(Ordering::Acquire), 5);
        // Each answer gives a place back and raises the ceiling by one.
        held.truncate(4);
        assert_eq!(state.ceiling.load(Ordering::Acquire), 10);
        assert_eq!(state.in_flight.load(Ordering::Acquire), 4);
        assert!(state.admit(Priority::Persist).is_some());
    }
}
