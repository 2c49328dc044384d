//! How one outbox row carries many events: the events a transaction writes for one destination
//! share a row, their payloads framed together. A send writes an event per owner for each of
//! several destinations, and a group commit many sends at once; a row per event made every
//! one of them an insert into three indexes and a delete, which is most of what a queue costs
//! Postgres. A row per destination per transaction costs that once.
//!
//! Rows written before framing (`framed = false`) hold one bare event in the row's own columns,
//! and are still read.

use prost::Message as _;
use uuid::Uuid;

use crate::{NewRow, OutboxMessage};

/// Most events one row holds: a row always fits in one call.
pub(crate) const MAX_ROW_ITEMS: usize = 500;
const _: () = assert!(MAX_ROW_ITEMS <= crate::MAX_CALL);

/// The payload of a framed row.
#[derive(Clone, PartialEq, prost::Message)]
struct Frame {
    #[prost(message, repeated, tag = "1")]
    items: Vec<Item>,
}

/// One event of a framed row.
#[derive(Clone, PartialEq, prost::Message)]
struct Item {
    /// The event id's 16 bytes.
    #[prost(bytes = "vec", tag = "1")]
    event_id: Vec<u8>,
    #[prost(string, optional, tag = "2")]
    traceparent: Option<String>,
    #[prost(bytes = "vec", tag = "3")]
    payload: Vec<u8>,
}

/// The payload of a row holding `items`.
pub(crate) fn encode<'a>(items: impl IntoIterator<Item = &'a NewRow>) -> Vec<u8> {
    Frame {
        items: items
            .into_iter()
            .map(|r| Item {
                event_id: r.event_id.as_bytes().to_vec(),
                traceparent: r.traceparent.clone(),
                payload: r.payload.clone(),
            })
            .collect(),
    }
    .encode_to_vec()
}

/// A row as claimed from the table.
#[derive(sqlx::FromRow)]
pub(crate) struct StoredRow {
    pub id: i64,
    pub event_id: Uuid,
    pub payload: Vec<u8>,
    pub attempts: i32,
    pub traceparent: Option<String>,
    pub framed: bool,
}

/// The events of a stored row, each carrying the row's id and attempts.
pub(crate) fn decode(row: StoredRow) -> Result<Vec<OutboxMessage>, String> {
    if !row.framed {
        return Ok(vec![OutboxMessage {
            id: row.id,
            event_id: row.event_id,
            payload: row.payload,
            attempts: row.attempts,
            traceparent: row.traceparent,
        }]);
    }
    let frame = Frame::decode(row.payload.as_slice())
        .map_err(|e| format!("outbox row {} is not a frame: {e}", row.id))?;
    frame
        .items
        .into_iter()
        .map(|item| {
            let event_id = Uuid::from_slice(&item.event_id)
                .map_err(|e| format!("outbox row {} holds a bad event id: {e}", row.id))?;
            Ok(OutboxMessage {
                id: row.id,
                event_id,
                payload: item.payload,
                attempts: row.attempts,
                traceparent: item.traceparent,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(payload: Vec<u8>, framed: bool) -> StoredRow {
        StoredRow {
            id: 7,
            event_id: Uuid::from_u128(1),
            payload,
            attempts: 2,
            traceparent: Some("00-row-01".into()),
            framed,
        }
    }

    /// Every event comes back with its own id, trace and payload, in the order written.
    #[test]
    fn a_framed_row_gives_back_its_events() -> Result<(), String> {
        let rows: Vec<NewRow> = (1..=3u8)
            .map(|i| NewRow {
                destination: "updates",
                event_id: Uuid::from_u128(i.into()),
                payload: vec![i; i.into()],
                traceparent: (i != 2).then(|| format!("00-{i}-01")),
            })
            .collect();
        let events = decode(stored(encode(&rows), true))?;
        assert_eq!(events.len(), 3);
        for (event, row) in events.iter().zip(&rows) {
            assert_eq!(
                (event.id, event.attempts, event.event_id),
                (7, 2, row.event_id)
            );
            assert_eq!(event.payload, row.payload);
            assert_eq!(event.traceparent, row.traceparent);
        }
        Ok(())
    }

    /// A row written before framing is one event: its payload as it is.
    #[test]
    fn a_row_from_before_framing_is_one_event() -> Result<(), String> {
        let events = decode(stored(vec![1, 2, 3], false))?;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].payload, vec![1, 2, 3]);
        assert_eq!(events[0].event_id, Uuid::from_u128(1));
        assert_eq!(events[0].traceparent.as_deref(), Some("00-row-01"));
        Ok(())
    }

    /// A payload that is not a frame is an error, not a panic or an empty row.
    #[test]
    fn a_garbled_frame_is_an_error() {
        assert!(decode(stored(vec![0xff, 0xff, 0xff], true)).is_err());
        let bad_id = Frame {
            items: vec![Item {
                event_id: vec![1, 2, 3],
                traceparent: None,
                payload: vec![],
            }],
        };
        assert!(decode(stored(bad_id.encode_to_vec(), true)).is_err());
    }
}
