//! Natural batching, shared by every queue that feeds one transaction or one call: take what
//! is queued right now and never wait for more, so a lone item goes at once and a burst that
//! arrived during the previous round shares the next one.

use std::time::Duration;

use tokio::sync::mpsc;

use crate::{MAX_CALL, OutboxMessage};

/// Waits for one item, then takes every item already queued until their `weight` reaches
/// `max`. `None` once the queue is closed and empty.
pub async fn next_batch<T>(
    rx: &mut mpsc::Receiver<T>,
    max: usize,
    weight: impl Fn(&T) -> usize,
) -> Option<Vec<T>> {
    next_batch_lingering(rx, max, weight, Duration::ZERO).await
}

/// Like [`next_batch`], but waits `linger` after the first item before taking the rest, for
/// consumers where fewer and larger batches are worth a little delay. The timer starts only
/// once an item is there: an idle queue costs no wake-ups.
pub(crate) async fn next_batch_lingering<T>(
    rx: &mut mpsc::Receiver<T>,
    max: usize,
    weight: impl Fn(&T) -> usize,
    linger: Duration,
) -> Option<Vec<T>> {
    let first = rx.recv().await?;
    if !linger.is_zero() {
        tokio::time::sleep(linger).await;
    }
    let mut size = weight(&first);
    let mut batch = vec![first];
    while size < max {
        match rx.try_recv() {
            Ok(item) => {
                size += weight(&item);
                batch.push(item);
            }
            Err(_) => break,
        }
    }
    Some(batch)
}

/// Rows' events (each row's id and its events) as calls of at most [`MAX_CALL`] events, with
/// the row id of each event. A row is never split between two calls, so that each row is
/// acknowledged, deleted or retried as a whole.
pub(crate) fn calls(rows: Vec<(i64, Vec<OutboxMessage>)>) -> Vec<(Vec<i64>, Vec<OutboxMessage>)> {
    let mut calls: Vec<(Vec<i64>, Vec<OutboxMessage>)> = Vec::new();
    for (id, events) in rows {
        let n = events.len();
        match calls.last_mut() {
            Some((ids, batch)) if batch.len() + n <= MAX_CALL => {
                ids.extend(std::iter::repeat_n(id, n));
                batch.extend(events);
            }
            _ => calls.push((vec![id; n], events)),
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items that arrive while the first one lingers share its batch; without a linger the
    /// first one goes alone.
    #[tokio::test]
    async fn a_lingering_batch_takes_what_arrives_meanwhile() -> anyhow::Result<()> {
        for (linger, expected) in [(Duration::ZERO, 1), (Duration::from_millis(300), 3)] {
            let (tx, mut rx) = mpsc::channel(8);
            tx.send(1).await?;
            let later = tx.clone();
            let sending = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                for i in 2..=3 {
                    let _ = later.send(i).await;
                }
            });
            let batch = next_batch_lingering(&mut rx, 100, |_| 1, linger).await;
            assert_eq!(batch.map(|b| b.len()), Some(expected));
            sending.await?;
        }
        Ok(())
    }
}
