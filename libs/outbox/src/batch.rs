//! Natural batching, shared by every queue that feeds one transaction or one call: take what
//! is queued right now and never wait for more, so a lone item goes at once and a burst that
//! arrived during the previous round shares the next one.

use tokio::sync::mpsc;

/// Waits for one item, then takes every item already queued until their `weight` reaches
/// `max`. `None` once the queue is closed and empty.
pub async fn next_batch<T>(
    rx: &mut mpsc::Receiver<T>,
    max: usize,
    weight: impl Fn(&T) -> usize,
) -> Option<Vec<T>> {
    let first = rx.recv().await?;
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
