//! Forwarding. A forward is a send: each forwarded message goes through the one send
//! transaction (sql/send_claim.sql, sql/send_write.sql) with its own key, as one job of the
//! group commit, so the forwards of a call commit together. What this module adds is the rule
//! of the call (its limits, the sources it may copy) and the copy itself: a source message's
//! content becomes the send's request in [`content`], and its author the forward header.
//!
//! The sources are read before the send (the caller's boxes by id, with their bodies, in one
//! statement: `store::by_ids`), and so are the call's keys (`send::any_key_reused`), so that a
//! call naming a missing or protected message, or reusing a key for another message, is
//! refused before anything is written; a send that is not a forward never pays for either.

use std::collections::HashSet;

use oxigram_errors::{ErrorCode, status};
use oxigram_proto::{
    resolve_peer,
    types::v1::{
        ForwardMessagesRequest, InputPeer, Message, MessageFwdHeader, Peer, SendMessageRequest,
    },
};
use sha2::{Digest, Sha256};
use tonic::Status;

use crate::send::NewMessage;

/// Most messages one call forwards.
pub const MAX_FORWARD_IDS: usize = 100;

/// A forward request that passed the checks of its shape, its peers resolved.
pub struct Forward {
    pub owner_id: i64,
    /// The forwarder's device, which has the results already and gets no push.
    pub auth_key_id: i64,
    /// The dialog the messages are taken from.
    pub from_peer: i64,
    /// The dialog they are sent to (the owner herself: Saved Messages).
    pub to_peer: i64,
    pub request: ForwardMessagesRequest,
    pub traceparent: Option<String>,
}

impl Forward {
    /// Checks a request's shape: the peers, 1 to 100 positive ids, one distinct non-zero
    /// random_id per id.
    pub fn check(
        owner_id: i64,
        auth_key_id: i64,
        request: ForwardMessagesRequest,
        traceparent: Option<String>,
    ) -> Result<Self, Status> {
        if owner_id <= 0 {
            return Err(status(
                ErrorCode::UserIdInvalid,
                "owner_id must be positive",
            ));
        }
        let (Some(from_peer), Some(to_peer)) = (
            resolve_peer(request.from_peer.as_ref(), owner_id),
            resolve_peer(request.to_peer.as_ref(), owner_id),
        ) else {
            return Err(status(
                ErrorCode::PeerIdInvalid,
                "from_peer and to_peer must name users",
            ));
        };
        let r = &request;
        if r.ids.is_empty() {
            return Err(status(ErrorCode::MessageIdsEmpty, "no ids to forward"));
        }
        if r.ids.len() > MAX_FORWARD_IDS {
            return Err(status(
                ErrorCode::LimitInvalid,
                &format!("at most {MAX_FORWARD_IDS} ids per forward"),
            ));
        }
        if r.ids.iter().any(|&id| id <= 0) {
            return Err(status(ErrorCode::MessageIdInvalid, "ids must be positive"));
        }
        if r.random_ids.len() != r.ids.len() {
            return Err(status(
                ErrorCode::RandomIdInvalid,
                "random_ids must have one key per id",
            ));
        }
        let mut keys = HashSet::with_capacity(r.random_ids.len());
        if r.random_ids.iter().any(|&k| k == 0 || !keys.insert(k)) {
            return Err(status(
                ErrorCode::RandomIdInvalid,
                "random_ids must be distinct and not 0",
            ));
        }
        Ok(Self {
            owner_id,
            auth_key_id,
            from_peer,
            to_peer,
            request,
            traceparent,
        })
    }

    /// The sends of this forward, in request order, given the owner's messages with the
    /// request's ids (`sources`, any order). Refused as a whole when an id names no message of
    /// the dialog with from_peer (`MESSAGE_ID_INVALID`) or a protected one
    /// (`CHAT_FORWARDS_RESTRICTED`).
    pub fn sends(&self, sources: &[Message]) -> Result<Vec<NewMessage>, Status> {
        let r = &self.request;
        r.ids
            .iter()
            .zip(&r.random_ids)
            .map(|(&id, &random_id)| {
                let source = sources
                    .iter()
                    .find(|m| m.id == id && m.peer_user() == self.from_peer)
                    .ok_or_else(|| {
                        status(
                            ErrorCode::MessageIdInvalid,
                            &format!("no message {id} in the dialog to forward from"),
                        )
                    })?;
                if source.noforwards {
                    return Err(status(
                        ErrorCode::ChatForwardsRestricted,
                        &format!("message {id} may not be forwarded"),
                    ));
                }
                Ok(NewMessage {
                    sender_id: self.owner_id,
                    peer_id: self.to_peer,
                    auth_key_id: self.auth_key_id,
                    request: content(source, self.to_peer, random_id, r),
                    fwd_from: (!r.drop_author).then(|| self.header(source)),
                    request_hash: self.request_hash(id),
                    traceparent: self.traceparent.clone(),
                })
            })
            .collect()
    }

    /// The header of a forward of `source`: its own header when it is a forward already (the
    /// first author stays), else one naming its sender, date and id. In Saved Messages it also
    /// names the dialog and id it was saved from.
    fn header(&self, source: &Message) -> MessageFwdHeader {
        let mut header = source.fwd_from.unwrap_or(MessageFwdHeader {
            from_user_id: source.from_user_id,
            date: source.date,
            msg_id: source.id,
            saved_from_peer: None,
            saved_from_msg_id: 0,
        });
        (header.saved_from_peer, header.saved_from_msg_id) = match self.to_peer == self.owner_id {
            true => (Some(Peer::user(self.from_peer)), source.id),
            false => (None, 0),
        };
        header
    }

    /// What makes two forwards with one key the same request: the message forwarded and how,
    /// not its content, so that a retry after an edit of the source still finds the original.
    /// Never equal to a send's hash.
    fn request_hash(&self, id: i64) -> Vec<u8> {
        let r = &self.request;
        let mut h = Sha256::new();
        h.update(b"forward");
        for n in [self.from_peer, id, self.to_peer] {
            h.update(n.to_le_bytes());
        }
        h.update([
            u8::from(r.drop_author),
            u8::from(r.silent),
            u8::from(r.noforwards),
        ]);
        h.finalize().to_vec()
    }
}

/// The send of a source message's content to `to_peer`: the one place a forward copies a
/// message, field by field, so that a new content field of a message is copied here.
fn content(
    source: &Message,
    to_peer: i64,
    random_id: i64,
    r: &ForwardMessagesRequest,
) -> SendMessageRequest {
    SendMessageRequest {
        peer: Some(InputPeer::user(to_peer)),
        random_id,
        text: source.text.clone(),
        entities: source.entities.clone(),
        // A forward replies to nothing, so it quotes nothing either.
        reply_to_msg_id: 0,
        quote_text: String::new(),
        quote_entities: Vec::new(),
        quote_offset: None,
        silent: r.silent,
        noforwards: r.noforwards,
        // The file goes with the forward: the new recipient's box holds it, which is her
        // right to download it.
        media: source.media.as_deref().cloned(),
        grouped_id: 0,
    }
}

#[cfg(test)]
mod tests {
    use oxigram_proto::types::v1::InputPeer;

    use super::*;

    fn request(ids: Vec<i64>, random_ids: Vec<i64>) -> ForwardMessagesRequest {
        ForwardMessagesRequest {
            from_peer: Some(InputPeer::user(2)),
            to_peer: Some(InputPeer::user(3)),
            ids,
            random_ids,
            ..Default::default()
        }
    }

    fn code<T>(r: Result<T, Status>) -> Option<String> {
        r.err().and_then(|s| oxigram_errors::code_of(&s))
    }

    #[test]
    fn the_shape_of_a_forward_is_checked() {
        let ok = request(vec![5, 6], vec![10, 11]);
        let too_many: Vec<i64> = (1..=101).collect();
        let at_most: Vec<i64> = (1..=100).collect();
        let table: Vec<(i64, ForwardMessagesRequest, Option<&str>)> = vec![
            (1, ok.clone(), None),
            (1, request(at_most.clone(), at_most), None),
            (0, ok.clone(), Some("USER_ID_INVALID")),
            (
                1,
                ForwardMessagesRequest {
                    from_peer: None,
                    ..ok.clone()
                },
                Some("PEER_ID_INVALID"),
            ),
            (
                1,
                ForwardMessagesRequest {
                    to_peer: Some(InputPeer::user(0)),
                    ..ok.clone()
                },
                Some("PEER_ID_INVALID"),
            ),
            (1, request(vec![], vec![]), Some("MESSAGE_IDS_EMPTY")),
            (
                1,
                request(too_many.clone(), too_many),
                Some("LIMIT_INVALID"),
            ),
            (
                1,
                request(vec![5, 0], vec![10, 11]),
                Some("MESSAGE_ID_INVALID"),
            ),
            (1, request(vec![5, 6], vec![10]), Some("RANDOM_ID_INVALID")),
            (
                1,
                request(vec![5, 6], vec![10, 0]),
                Some("RANDOM_ID_INVALID"),
            ),
            (
                1,
                request(vec![5, 6], vec![10, 10]),
                Some("RANDOM_ID_INVALID"),
            ),
        ];
        for (owner, r, want) in table {
            let got = code(Forward::check(owner, 0, r.clone(), None));
            assert_eq!(got.as_deref(), want, "{owner} {r:?}");
        }
    }

    fn message(id: i64, peer: i64, from: i64) -> Message {
        Message {
            id,
            peer_id: Some(Peer::user(peer)),
            from_user_id: from,
            date: 1000 + id,
            text: format!("text {id}"),
            ..Default::default()
        }
    }

    #[test]
    fn the_sources_decide_the_whole_call() -> Result<(), Status> {
        let f = Forward::check(1, 9, request(vec![6, 5], vec![10, 11]), None)?;
        let mut protected = message(6, 2, 2);
        protected.noforwards = true;
        let table: Vec<(Vec<Message>, Option<&str>)> = vec![
            (vec![message(5, 2, 2), message(6, 2, 1)], None),
            // Either id missing, or in another dialog, refuses every forward of the call.
            (vec![message(5, 2, 2)], Some("MESSAGE_ID_INVALID")),
            (
                vec![message(5, 2, 2), message(6, 4, 4)],
                Some("MESSAGE_ID_INVALID"),
            ),
            (
                vec![message(5, 2, 2), protected],
                Some("CHAT_FORWARDS_RESTRICTED"),
            ),
        ];
        for (sources, want) in table {
            assert_eq!(code(f.sends(&sources)).as_deref(), want);
        }
        let sends = f.sends(&[message(5, 2, 2), message(6, 2, 1)])?;
        type Sent<'a> = (i64, &'a str, Option<(i64, i64, i64)>);
        let got: Vec<Sent> = sends
            .iter()
            .map(|s| {
                (
                    s.request.random_id,
                    s.request.text.as_str(),
                    s.fwd_from
                        .as_ref()
                        .map(|h| (h.from_user_id, h.date, h.msg_id)),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (10, "text 6", Some((1, 1006, 6))),
                (11, "text 5", Some((2, 1005, 5)))
            ]
        );
        assert!(sends.iter().all(|s| s.peer_id == 3));
        assert_ne!(sends[0].request_hash, sends[1].request_hash);
        Ok(())
    }

    #[test]
    fn a_forward_of_a_forward_keeps_the_first_author() -> Result<(), Status> {
        let first = MessageFwdHeader {
            from_user_id: 7,
            date: 50,
            msg_id: 70,
            ..Default::default()
        };
        let mut source = message(5, 2, 2);
        source.fwd_from = Some(first);
        let to = |peer: InputPeer, drop_author| {
            Forward::check(
                1,
                0,
                ForwardMessagesRequest {
                    to_peer: Some(peer),
                    drop_author,
                    ..request(vec![5], vec![10])
                },
                None,
            )
        };
        let elsewhere = to(InputPeer::user(3), false)?.sends(std::slice::from_ref(&source))?;
        assert_eq!(elsewhere[0].fwd_from, Some(first));
        // Saved Messages: the same author, and where it was saved from.
        let saved = to(InputPeer::me(), false)?.sends(std::slice::from_ref(&source))?;
        assert_eq!(
            saved[0].fwd_from,
            Some(MessageFwdHeader {
                saved_from_peer: Some(Peer::user(2)),
                saved_from_msg_id: 5,
                ..first
            })
        );
        assert_eq!(saved[0].peer_id, 1);
        let dropped = to(InputPeer::user(3), true)?.sends(std::slice::from_ref(&source))?;
        assert_eq!(dropped[0].fwd_from, None);
        assert_ne!(dropped[0].request_hash, elsewhere[0].request_hash);
        Ok(())
    }
}
