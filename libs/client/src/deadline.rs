//! Bounding a call in time: the deadline travels to the server (`grpc-timeout`) and the client
//! stops waiting when it passes, so a call never hangs on a lost answer.

use std::{future::Future, time::Duration};

use tonic::{Request, Response, Status};

use crate::Error;

/// How long a unary call may take; [`Deadline::NONE`] waits as long as the connection lives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deadline(Option<Duration>);

impl Deadline {
    pub const NONE: Self = Self(None);

    pub const fn after(limit: Duration) -> Self {
        Self(Some(limit))
    }

    pub fn limit(self) -> Option<Duration> {
        self.0
    }

    /// A request carrying the deadline to the server.
    pub fn request<T>(self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(limit) = self.0 {
            request.set_timeout(limit);
        }
        request
    }

    /// Awaits a unary call, at most until the deadline.
    pub async fn unary<T>(
        self,
        call: impl Future<Output = Result<Response<T>, Status>>,
    ) -> Result<T, Error> {
        Ok(self.bound(call).await??.into_inner())
    }

    /// Awaits any future, at most until the deadline.
    pub async fn bound<T>(self, work: impl Future<Output = T>) -> Result<T, Error> {
        match self.0 {
            Some(limit) => tokio::time::timeout(limit, work)
                .await
                .map_err(|_| Error::Timeout),
            None => Ok(work.await),
        }
    }
}
