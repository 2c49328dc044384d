//! The Messages gRPC service: validation at the boundary, sends through the group commit, and
//! the owner-view reads.

use oxigram_errors::{Error, ErrorCode, check_text, status};
use oxigram_proto::{
    messages::v1::{
        BlockRequest, BlockedAmongRequest, BlockedAmongResponse, BlockedByRequest,
        BlockedByResponse, DeleteHistoryRequest, DeleteMessagesRequest, EditMessageRequest,
        ForwardMessagesRequest, GetBlockedRequest, GetBlockedResponse, GetHistoryRequest,
        GetMessagesRequest, HoldsContentRequest, HoldsContentResponse, MediaOfMessageRequest,
        MessageList, ReadMessageContentsRequest, ReadReactionsRequest, SearchRequest,
        SearchResponse, SendMediaRequest, SendMessageRequest, SendReactionRequest,
        messages_server::Messages,
    },
    require_peer,
    types::v1::{
        self as types, AffectedHistory, AffectedMessages, BlockResponse, EditMessageResponse,
        ForwardMessagesResponse, MessageMedia, SendMediaResponse, SendMessageResponse,
    },
};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use tonic::{Request, Response, Status};

use oxigram_outbox::Outbox;

use crate::{
    delete::{self, Delete, DeleteOutcome, Deleted, MAX_DELETE_BATCH, Targets},
    edit::{self, Edit, EditOutcome},
    entities,
    file_reference::{self, Refused},
    forward::Forward,
    group_commit::GroupCommit,
    outbound::ToUpdates,
    reactions::{self, Logged, MAX_REACTION_CODE_POINTS, React, ReactOutcome, ReadReactions},
    read_contents::{self, ContentsRead, ReadContents},
    rows,
    search_words::{QueryRefused, QueryWords},
    send::{self, NewMessage},
    store::{self, HistoryWindow, SearchQuery},
};

/// Longest text, in Unicode code points.
pub const MAX_TEXT_CODE_POINTS: usize = 4096;
/// Longest caption of a media message, in Unicode code points.
pub const MAX_CAPTION_CODE_POINTS: usize = 1024;
/// Most media one album holds.
pub const MAX_ALBUM: usize = 10;
/// Most messages one history page returns.
pub const MAX_HISTORY_LIMIT: i32 = 100;
/// Most ids one getMessages call may name: as many as the new messages of the largest
/// difference slice, whose messages the gateway fetches in one call. Clients are held to a
/// smaller page at the gateway.
pub const MAX_IDS: usize = 1000;
/// How far add_offset may move a history window.
pub const MAX_ADD_OFFSET: i32 = 100;
/// Most blocked users one page returns.
pub const MAX_BLOCKED_LIMIT: i32 = 100;
/// Longest search query, in Unicode code points.
pub const MAX_SEARCH_CODE_POINTS: usize = 256;
/// Most messages one search page returns.
pub const MAX_SEARCH_LIMIT: i32 = 100;

pub struct MessagesService {
    pool: PgPool,
    group: GroupCommit,
    /// Edits write their events here and hand them on themselves.
    outbox: Outbox,
    to_updates: ToUpdates,
}

impl MessagesService {
    pub fn new(pool: PgPool, group: GroupCommit, outbox: Outbox, to_updates: ToUpdates) -> Self {
        Self {
            pool,
            group,
            outbox,
            to_updates,
        }
    }
}

/// What makes two sends "the same request" for the idempotency key: the peer as resolved, so
/// `self` and the sender's own id are one peer. Formatting and a quote are hashed only when
/// present, after a NUL (which no text holds), so that a plain message hashes as it always did.
fn request_hash(peer_id: i64, r: &types::SendMessageRequest) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(peer_id.to_le_bytes());
    h.update(r.reply_to_msg_id.to_le_bytes());
    h.update([u8::from(r.silent), u8::from(r.noforwards)]);
    h.update(r.text.as_bytes());
    // A media message hashes its file and album too, after a NUL of their own.
    if r.media.is_some() || r.grouped_id != 0 {
        h.update([0, 1]);
        let media = rows::encode_media(r.media.as_ref());
        h.update((media.len() as u64).to_le_bytes());
        h.update(media);
        h.update(r.grouped_id.to_le_bytes());
    }
    if !r.entities.is_empty() || !r.quote_text.is_empty() {
        h.update([0]);
        for part in [
            entities::encode(&r.entities),
            r.quote_text.as_bytes().to_vec(),
            entities::encode(&r.quote_entities),
            r.quote_offset.unwrap_or(-1).to_le_bytes().to_vec(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
    }
    h.finalize().to_vec()
}

/// Checks a send, and puts its entities and its quote's in their one order; the user it goes
/// to.
fn validate(sender_id: i64, r: &mut types::SendMessageRequest) -> Result<i64, Status> {
    if sender_id <= 0 {
        return Err(status(
            ErrorCode::UserIdInvalid,
            "sender_id must be positive",
        ));
    }
    let peer_id = require_peer(r.peer.as_ref(), sender_id)?;
    if r.random_id == 0 {
        return Err(status(
            ErrorCode::RandomIdInvalid,
            "random_id must not be 0",
        ));
    }
    match r.media.is_some() {
        true => check_caption(&r.text)?,
        false => check_message_text(&r.text)?,
    }
    if r.reply_to_msg_id < 0 {
        return Err(status(
            ErrorCode::MessageIdInvalid,
            "reply_to_msg_id must not be negative",
        ));
    }
    r.entities = entities::checked(&r.text, std::mem::take(&mut r.entities))?;
    r.quote_entities = entities::checked_quote(
        r.reply_to_msg_id,
        &r.quote_text,
        std::mem::take(&mut r.quote_entities),
        r.quote_offset,
    )?;
    Ok(peer_id)
}

/// A message's text, sent or edited: no NUL, not only whitespace, at most 4096 code points.
fn check_message_text(text: &str) -> Result<(), Status> {
    check_text("text", text)?;
    if text.trim().is_empty() {
        return Err(status(ErrorCode::MessageEmpty, "the message has no text"));
    }
    if text.chars().count() > MAX_TEXT_CODE_POINTS {
        return Err(status(
            ErrorCode::MessageTooLong,
            "the text is longer than 4096 characters",
        ));
    }
    Ok(())
}

/// A media message's caption: no NUL, at most 1024 code points, and may be empty.
fn check_caption(text: &str) -> Result<(), Status> {
    check_text("text", text)?;
    if text.chars().count() > MAX_CAPTION_CODE_POINTS {
        return Err(status(
            ErrorCode::MediaCaptionTooLong,
            "a caption is at most 1024 characters",
        ));
    }
    Ok(())
}

/// Checks the sends of one SendMedia call: 1 to 10, each with its media, to one peer, with
/// distinct keys (an album is one transaction); the user they go to.
fn validate_media(sender_id: i64, sends: &mut [types::SendMessageRequest]) -> Result<i64, Status> {
    if sends.is_empty() {
        return Err(status(ErrorCode::MediaEmpty, "no media to send"));
    }
    if sends.len() > MAX_ALBUM {
        return Err(status(
            ErrorCode::MultiMediaTooLong,
            "an album has at most 10 media",
        ));
    }
    let mut peer = None;
    let mut keys = std::collections::HashSet::new();
    for r in sends.iter_mut() {
        if r.media.is_none() {
            return Err(status(ErrorCode::MediaEmpty, "every item needs its media"));
        }
        let to = validate(sender_id, r)?;
        if peer.is_some_and(|p| p != to) {
            return Err(status(
                ErrorCode::PeerIdInvalid,
                "an album goes to one peer",
            ));
        }
        peer = Some(to);
        if !keys.insert(r.random_id) {
            return Err(status(
                ErrorCode::RandomIdDuplicate,
                "each item of an album needs its own random_id",
            ));
        }
    }
    peer.ok_or_else(|| status(ErrorCode::MediaEmpty, "no media to send"))
}

/// Checks an edit, and puts its entities in their one order; the user of its dialog.
fn validate_edit(owner_id: i64, r: &mut types::EditMessageRequest) -> Result<i64, Status> {
    if owner_id <= 0 {
        return Err(status(
            ErrorCode::UserIdInvalid,
            "owner_id must be positive",
        ));
    }
    let peer_id = require_peer(r.peer.as_ref(), owner_id)?;
    if r.id <= 0 {
        return Err(status(ErrorCode::MessageIdInvalid, "id must be positive"));
    }
    // Whether the edited message keeps a file (so the text is a caption, which may be empty)
    // is known once it is locked (`edit::edit`); a new file makes it a caption now.
    match r.media.is_some() {
        true => check_caption(&r.text)?,
        false => check_edit_text(&r.text)?,
    }
    r.entities = entities::checked(&r.text, std::mem::take(&mut r.entities))?;
    Ok(peer_id)
}

/// An edit's text before the message is known: what holds for a text and a caption alike.
fn check_edit_text(text: &str) -> Result<(), Status> {
    check_text("text", text)?;
    if text.chars().count() > MAX_TEXT_CODE_POINTS {
        return Err(status(
            ErrorCode::MessageTooLong,
            "the text is longer than 4096 characters",
        ));
    }
    Ok(())
}

/// The ids a DeleteMessages names: at most 1000; those not above 0 are dropped.
fn delete_ids(owner_id: i64, r: &types::DeleteMessagesRequest) -> Result<Vec<i64>, Status> {
    check_owner(owner_id)?;
    if r.ids.len() > MAX_DELETE_BATCH {
        return Err(status(
            ErrorCode::MessageIdsTooMany,
            &format!("at most {MAX_DELETE_BATCH} ids"),
        ));
    }
    Ok(r.ids.iter().copied().filter(|id| *id > 0).collect())
}

/// The ids a ReadMessageContents names: at most 1000; those not above 0 are dropped.
fn contents_ids(owner_id: i64, r: &types::ReadMessageContentsRequest) -> Result<Vec<i64>, Status> {
    check_owner(owner_id)?;
    if r.ids.len() > MAX_IDS {
        return Err(status(
            ErrorCode::MessageIdsTooMany,
            &format!("at most {MAX_IDS} ids"),
        ));
    }
    let mut ids: Vec<i64> = r.ids.iter().copied().filter(|id| *id > 0).collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// Checks a SendReaction; the user of its dialog.
fn validate_reaction(owner_id: i64, r: &types::SendReactionRequest) -> Result<i64, Status> {
    check_owner(owner_id)?;
    let peer_id = require_peer(r.peer.as_ref(), owner_id)?;
    if r.msg_id <= 0 {
        return Err(status(
            ErrorCode::MessageIdInvalid,
            "msg_id must be positive",
        ));
    }
    check_text("reaction", &r.reaction)?;
    check_reaction(&r.reaction)?;
    Ok(peer_id)
}

/// A reaction is an emoji (empty removes one): a short run of code points, none a space or a
/// control character, not all ASCII (an emoji's keycap digits are, its other parts are not).
fn check_reaction(reaction: &str) -> Result<(), Status> {
    if reaction.is_empty() {
        return Ok(());
    }
    let emoji_like = reaction.chars().count() <= MAX_REACTION_CODE_POINTS
        && !reaction.is_ascii()
        && !reaction
            .chars()
            .any(|c| c.is_control() || c.is_whitespace());
    if !emoji_like {
        return Err(status(
            ErrorCode::ReactionInvalid,
            &format!("a reaction is one emoji, at most {MAX_REACTION_CODE_POINTS} code points"),
        ));
    }
    Ok(())
}

/// What a DeleteHistory clears: the peer's dialog, ids up to max_id (0 = all).
fn history_targets(owner_id: i64, r: &types::DeleteHistoryRequest) -> Result<Targets, Status> {
    check_owner(owner_id)?;
    let peer = oxigram_proto::resolve_peer(r.peer.as_ref(), owner_id)
        .ok_or_else(|| status(ErrorCode::PeerIdInvalid, "peer names no user"))?;
    if r.max_id < 0 {
        return Err(status(
            ErrorCode::MessageIdInvalid,
            "max_id must not be negative",
        ));
    }
    Ok(Targets::History {
        peer,
        max_id: if r.max_id == 0 { i64::MAX } else { r.max_id },
        just_clear: r.just_clear,
    })
}

fn check_owner(owner_id: i64) -> Result<(), Status> {
    if owner_id <= 0 {
        return Err(status(
            ErrorCode::UserIdInvalid,
            "owner_id must be positive",
        ));
    }
    Ok(())
}

impl MessagesService {
    /// Runs a delete and hands its events on; the (pts, pts_count) of the caller's event
    /// ((0, 0) when she lost no box, or svc-updates did not answer) and whether more is left.
    async fn delete(&self, delete: Delete) -> Result<(i32, i32, bool), Status> {
        let deleted = match delete::delete(&self.pool, &self.outbox, &delete)
            .await
            .map_err(Error::from)?
        {
            DeleteOutcome::Deleted(deleted) => deleted,
            DeleteOutcome::Forbidden => {
                return Err(status(
                    ErrorCode::DeleteMessagesForbidden,
                    "the peer blocked you: a revoke cannot reach her messages",
                ));
            }
        };
        let Deleted {
            updates_events,
            updates_rows,
            more,
        } = deleted;
        if updates_events.is_empty() {
            return Ok((0, 0, more));
        }
        let (pts, pts_count) = self
            .to_updates
            .fast_path(&self.outbox, updates_events, &updates_rows, delete.owner_id)
            .await;
        Ok((pts, pts_count, more))
    }
}

impl MessagesService {
    /// Hands a change's events on (fast path) and answers the caller's pts; (0, 0) when
    /// nothing changed or svc-updates did not answer.
    async fn affected(&self, owner_id: i64, logged: Logged) -> AffectedMessages {
        if logged.updates_events.is_empty() {
            return AffectedMessages::default();
        }
        let (pts, pts_count) = self
            .to_updates
            .fast_path(
                &self.outbox,
                logged.updates_events,
                &logged.updates_rows,
                owner_id,
            )
            .await;
        AffectedMessages { pts, pts_count }
    }
}

#[tonic::async_trait]
impl Messages for MessagesService {
    async fn send_reaction(
        &self,
        request: Request<SendReactionRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let SendReactionRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer_id = validate_reaction(owner_id, &r)?;
        let react = React {
            owner_id,
            peer_id,
            auth_key_id,
            msg_id: r.msg_id,
            reaction: r.reaction,
            traceparent: oxigram_telemetry::propagation::current_traceparent(),
        };
        let logged = match reactions::react(&self.pool, &self.outbox, &react)
            .await
            .map_err(Error::from)?
        {
            ReactOutcome::Changed(logged) => logged,
            ReactOutcome::IdInvalid => {
                return Err(status(
                    ErrorCode::MessageIdInvalid,
                    "no message with this id in the dialog",
                ));
            }
            ReactOutcome::Blocked => {
                return Err(status(ErrorCode::UserIsBlocked, "the peer blocked you"));
            }
        };
        Ok(Response::new(self.affected(owner_id, logged).await))
    }

    async fn read_reactions(
        &self,
        request: Request<ReadReactionsRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let ReadReactionsRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        check_owner(owner_id)?;
        let peer_id = require_peer(request.unwrap_or_default().peer.as_ref(), owner_id)?;
        let read = ReadReactions {
            owner_id,
            peer_id,
            auth_key_id,
            traceparent: oxigram_telemetry::propagation::current_traceparent(),
        };
        let logged = reactions::read_reactions(&self.pool, &self.outbox, &read)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(self.affected(owner_id, logged).await))
    }

    async fn read_message_contents(
        &self,
        request: Request<ReadMessageContentsRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let ReadMessageContentsRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let ids = contents_ids(owner_id, &request.unwrap_or_default())?;
        let read = ReadContents {
            owner_id,
            auth_key_id,
            ids,
            traceparent: oxigram_telemetry::propagation::current_traceparent(),
        };
        let ContentsRead {
            updates_events,
            updates_rows,
        } = read_contents::read_contents(&self.pool, &self.outbox, &read)
            .await
            .map_err(Error::from)?;
        if updates_events.is_empty() {
            return Ok(Response::new(AffectedMessages::default()));
        }
        let (pts, pts_count) = self
            .to_updates
            .fast_path(&self.outbox, updates_events, &updates_rows, owner_id)
            .await;
        Ok(Response::new(AffectedMessages { pts, pts_count }))
    }

    async fn delete_messages(
        &self,
        request: Request<DeleteMessagesRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let DeleteMessagesRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let ids = delete_ids(owner_id, &r)?;
        let (pts, pts_count, _) = self
            .delete(Delete {
                owner_id,
                auth_key_id,
                targets: Targets::Ids(ids),
                revoke: r.revoke,
                traceparent: oxigram_telemetry::propagation::current_traceparent(),
            })
            .await?;
        Ok(Response::new(AffectedMessages { pts, pts_count }))
    }

    async fn delete_history(
        &self,
        request: Request<DeleteHistoryRequest>,
    ) -> Result<Response<AffectedHistory>, Status> {
        let DeleteHistoryRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let targets = history_targets(owner_id, &r)?;
        let (pts, pts_count, more) = self
            .delete(Delete {
                owner_id,
                auth_key_id,
                targets,
                revoke: r.revoke,
                traceparent: oxigram_telemetry::propagation::current_traceparent(),
            })
            .await?;
        Ok(Response::new(AffectedHistory {
            pts,
            pts_count,
            offset: i64::from(more),
        }))
    }

    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let SendMessageRequest {
            sender_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let mut r = request.unwrap_or_default();
        let peer_id = validate(sender_id, &mut r)?;
        let new = NewMessage {
            sender_id,
            peer_id,
            auth_key_id,
            request_hash: request_hash(peer_id, &r),
            request: r,
            fwd_from: None,
            traceparent: oxigram_telemetry::propagation::current_traceparent(),
        };
        Ok(Response::new(self.group.send(new).await?))
    }

    async fn send_media(
        &self,
        request: Request<SendMediaRequest>,
    ) -> Result<Response<SendMediaResponse>, Status> {
        let SendMediaRequest {
            sender_id,
            auth_key_id,
            mut sends,
        } = request.into_inner();
        let peer_id = validate_media(sender_id, &mut sends)?;
        let traceparent = oxigram_telemetry::propagation::current_traceparent();
        let sends: Vec<NewMessage> = sends
            .into_iter()
            .map(|r| NewMessage {
                sender_id,
                peer_id,
                auth_key_id,
                request_hash: request_hash(peer_id, &r),
                request: r,
                fwd_from: None,
                traceparent: traceparent.clone(),
            })
            .collect();
        // An album is stored whole or not at all; a single medium is a send like any other.
        if sends.len() > 1 {
            refuse_reused_keys(&self.pool, &sends).await?;
        }
        let sent = self.group.send_all(sends).await?;
        Ok(Response::new(SendMediaResponse { sent }))
    }

    async fn media_of_message(
        &self,
        request: Request<MediaOfMessageRequest>,
    ) -> Result<Response<MessageMedia>, Status> {
        let MediaOfMessageRequest {
            owner_id,
            peer,
            msg_id,
            file_reference,
        } = request.into_inner();
        let peer_id = require_peer(peer.as_ref(), owner_id)?;
        if msg_id <= 0 {
            return Err(status(
                ErrorCode::MessageIdInvalid,
                "msg_id must be positive",
            ));
        }
        // The box is the right: a message the owner's box holds in this dialog.
        let message = store::by_ids(&self.pool, owner_id, &[msg_id])
            .await
            .map_err(Error::from)?
            .into_iter()
            .find(|m| m.peer_user() == peer_id)
            .ok_or_else(|| {
                status(
                    ErrorCode::MessageIdInvalid,
                    "no message with this id in the dialog",
                )
            })?;
        let media = message
            .media
            .ok_or_else(|| status(ErrorCode::FileReferenceInvalid, "the message has no file"))?;
        let now = chrono::Utc::now().timestamp();
        match file_reference::check(owner_id, msg_id, media.file_id, &file_reference, now) {
            Ok(()) => Ok(Response::new(*media)),
            Err(Refused::Expired) => Err(status(
                ErrorCode::FileReferenceExpired,
                "the file reference expired: read the message again",
            )),
            Err(Refused::Invalid) => Err(status(
                ErrorCode::FileReferenceInvalid,
                "not a file reference of this message for you",
            )),
        }
    }

    async fn holds_content(
        &self,
        request: Request<HoldsContentRequest>,
    ) -> Result<Response<HoldsContentResponse>, Status> {
        let HoldsContentRequest { owner_id, sha256 } = request.into_inner();
        let holds = !sha256.is_empty()
            && store::holds_content(&self.pool, owner_id, &sha256)
                .await
                .map_err(Error::from)?;
        Ok(Response::new(HoldsContentResponse { holds }))
    }

    async fn forward_messages(
        &self,
        request: Request<ForwardMessagesRequest>,
    ) -> Result<Response<ForwardMessagesResponse>, Status> {
        let ForwardMessagesRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let forward = Forward::check(
            owner_id,
            auth_key_id,
            request.unwrap_or_default(),
            oxigram_telemetry::propagation::current_traceparent(),
        )?;
        let sources = store::by_ids(&self.pool, owner_id, &forward.request.ids)
            .await
            .map_err(Error::from)?;
        let sends = forward.sends(&sources)?;
        refuse_reused_keys(&self.pool, &sends).await?;
        let sent = self.group.send_all(sends).await?;
        Ok(Response::new(ForwardMessagesResponse { sent }))
    }

    async fn edit_message(
        &self,
        request: Request<EditMessageRequest>,
    ) -> Result<Response<EditMessageResponse>, Status> {
        let EditMessageRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let mut r = request.unwrap_or_default();
        let peer_id = validate_edit(owner_id, &mut r)?;
        let edit = Edit {
            owner_id,
            peer_id,
            auth_key_id,
            request: r,
            traceparent: oxigram_telemetry::propagation::current_traceparent(),
        };
        let edited = match edit::edit(&self.pool, &self.outbox, &edit)
            .await
            .map_err(Error::from)?
        {
            EditOutcome::Edited(edited) => *edited,
            EditOutcome::IdInvalid => {
                return Err(status(
                    ErrorCode::MessageIdInvalid,
                    "no message with this id in the dialog",
                ));
            }
            EditOutcome::AuthorRequired => {
                return Err(status(
                    ErrorCode::MessageAuthorRequired,
                    "only the author may edit a message",
                ));
            }
            EditOutcome::TextEmpty => {
                return Err(status(ErrorCode::MessageEmpty, "the message has no text"));
            }
            EditOutcome::CaptionTooLong => {
                return Err(status(
                    ErrorCode::MediaCaptionTooLong,
                    "a caption is at most 1024 characters",
                ));
            }
            EditOutcome::NotModified => {
                return Err(status(
                    ErrorCode::MessageNotModified,
                    "the message has this text and these entities already",
                ));
            }
            EditOutcome::Forbidden => {
                return Err(status(
                    ErrorCode::EditMessagesForbidden,
                    "the peer blocked you",
                ));
            }
        };
        let (pts, pts_count) = self
            .to_updates
            .fast_path(
                &self.outbox,
                edited.updates_events,
                &edited.updates_rows,
                owner_id,
            )
            .await;
        Ok(Response::new(EditMessageResponse {
            message: Some(edited.message),
            pts,
            pts_count,
        }))
    }

    async fn get_history(
        &self,
        request: Request<GetHistoryRequest>,
    ) -> Result<Response<MessageList>, Status> {
        let GetHistoryRequest { owner_id, request } = request.into_inner();
        let window = history_window(owner_id, &request.unwrap_or_default())?;
        let messages = store::history(&self.pool, &window)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(MessageList { messages }))
    }

    async fn get_messages(
        &self,
        request: Request<GetMessagesRequest>,
    ) -> Result<Response<MessageList>, Status> {
        let GetMessagesRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        if r.ids.len() > MAX_IDS {
            return Err(status(
                ErrorCode::LimitInvalid,
                &format!("at most {MAX_IDS} ids"),
            ));
        }
        let messages = store::by_ids(&self.pool, owner_id, &r.ids)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(MessageList { messages }))
    }

    async fn block(
        &self,
        request: Request<BlockRequest>,
    ) -> Result<Response<BlockResponse>, Status> {
        let BlockRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        if r.user_id <= 0 || r.user_id == owner_id {
            return Err(status(ErrorCode::PeerIdInvalid, "cannot block this user"));
        }
        store::set_blocked(&self.pool, owner_id, r.user_id, true)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(BlockResponse {}))
    }

    async fn unblock(
        &self,
        request: Request<BlockRequest>,
    ) -> Result<Response<BlockResponse>, Status> {
        let BlockRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        if r.user_id <= 0 {
            return Err(status(ErrorCode::PeerIdInvalid, "cannot unblock this user"));
        }
        store::set_blocked(&self.pool, owner_id, r.user_id, false)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(BlockResponse {}))
    }

    async fn get_blocked(
        &self,
        request: Request<GetBlockedRequest>,
    ) -> Result<Response<GetBlockedResponse>, Status> {
        let GetBlockedRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        let limit = oxigram_errors::page_limit(r.limit, 20, MAX_BLOCKED_LIMIT)?;
        let user_ids = store::blocked(&self.pool, owner_id, r.offset_user_id.max(0), limit)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(GetBlockedResponse { user_ids }))
    }

    async fn blocked_by(
        &self,
        request: Request<BlockedByRequest>,
    ) -> Result<Response<BlockedByResponse>, Status> {
        let BlockedByRequest { user_id, owner_ids } = request.into_inner();
        if owner_ids.len() > MAX_IDS {
            return Err(status(ErrorCode::LimitInvalid, "too many owners"));
        }
        let owner_ids = store::blocked_by(&self.pool, user_id, &owner_ids)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(BlockedByResponse { owner_ids }))
    }

    async fn blocked_among(
        &self,
        request: Request<BlockedAmongRequest>,
    ) -> Result<Response<BlockedAmongResponse>, Status> {
        let BlockedAmongRequest { owner_id, user_ids } = request.into_inner();
        if user_ids.len() > MAX_IDS {
            return Err(status(ErrorCode::LimitInvalid, "too many users"));
        }
        let user_ids = store::blocked_among(&self.pool, owner_id, &user_ids)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(BlockedAmongResponse { user_ids }))
    }

    async fn search(
        &self,
        request: Request<SearchRequest>,
    ) -> Result<Response<SearchResponse>, Status> {
        let SearchRequest { owner_id, request } = request.into_inner();
        let query = search_query(owner_id, request.unwrap_or_default())?;
        let page = store::search(&self.pool, &query)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(SearchResponse {
            messages: page.messages,
            next_offset_id: page.next_offset_id,
        }))
    }
}

/// Checks a search request: a query of at most 256 characters with a word of 3 characters or
/// more (or a character of a script written without spaces) to look up, non-negative ids and
/// dates, limit 1..=100 (0 = 20).
fn search_query(owner_id: i64, r: types::SearchRequest) -> Result<SearchQuery, Status> {
    check_text("q", &r.q)?;
    let text = r.q.trim();
    if text.chars().count() > MAX_SEARCH_CODE_POINTS {
        return Err(status(
            ErrorCode::SearchQueryTooLong,
            "the query is longer than 256 characters",
        ));
    }
    let words = QueryWords::parse(text).map_err(|refused| match refused {
        QueryRefused::Empty => status(
            ErrorCode::SearchQueryEmpty,
            "the query has no letters or digits",
        ),
        QueryRefused::TooShort => status(
            ErrorCode::SearchQueryTooShort,
            "the query has no word of 3 characters or more",
        ),
    })?;
    // No peer searches every dialog; a peer names one as everywhere else.
    let peer = match &r.peer {
        None => 0,
        Some(peer) => require_peer(Some(peer), owner_id)?,
    };
    if r.from_user_id < 0 {
        return Err(status(
            ErrorCode::UserIdInvalid,
            "from_user_id must not be negative",
        ));
    }
    if r.offset_id < 0 || r.min_date < 0 || r.max_date < 0 {
        return Err(status(
            ErrorCode::OffsetInvalid,
            "offset_id and dates must not be negative",
        ));
    }
    let limit = oxigram_errors::page_limit(r.limit, 20, MAX_SEARCH_LIMIT)?;
    Ok(SearchQuery {
        owner: owner_id,
        peer,
        words,
        min_date: r.min_date,
        max_date: if r.max_date == 0 {
            i64::MAX
        } else {
            r.max_date
        },
        from: r.from_user_id,
        below_id: if r.offset_id == 0 {
            i64::MAX
        } else {
            r.offset_id
        },
        limit,
    })
}

/// Checks and clamps a history request: limit 1..=100 (0 = 20), add_offset to [-100, 100].
fn history_window(owner_id: i64, r: &types::GetHistoryRequest) -> Result<HistoryWindow, Status> {
    if r.limit < 0 {
        return Err(status(
            ErrorCode::LimitInvalid,
            "limit must not be negative",
        ));
    }
    if r.offset_id < 0 || r.offset_date < 0 || r.max_id < 0 || r.min_id < 0 {
        return Err(status(
            ErrorCode::OffsetInvalid,
            "offsets and bounds must not be negative",
        ));
    }
    let peer = require_peer(r.peer.as_ref(), owner_id)?;
    let limit = match r.limit {
        0 => 20,
        l => l.min(MAX_HISTORY_LIMIT),
    };
    Ok(HistoryWindow {
        owner: owner_id,
        peer,
        offset_id: r.offset_id,
        offset_date: r.offset_date,
        add_offset: r.add_offset.clamp(-MAX_ADD_OFFSET, MAX_ADD_OFFSET),
        limit,
        max_id: r.max_id,
        min_id: r.min_id,
    })
}

/// Refuses a call whose sends must all be stored or none (an album, a forward) when a key of
/// one of them was used before for a different message: sent alone, that send would be
/// refused after the others were stored.
async fn refuse_reused_keys(pool: &PgPool, sends: &[NewMessage]) -> Result<(), Status> {
    if send::any_key_reused(pool, sends)
        .await
        .map_err(Error::from)?
    {
        return Err(status(
            ErrorCode::RandomIdDuplicate,
            "a random_id was already used for a different message",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(text: &str) -> types::SendMessageRequest {
        types::SendMessageRequest {
            peer: Some(types::InputPeer::user(2)),
            random_id: 7,
            text: text.into(),
            ..Default::default()
        }
    }

    fn code<T>(r: Result<T, Status>) -> Option<String> {
        r.err().and_then(|s| oxigram_errors::code_of(&s))
    }

    #[test]
    fn text_limits_count_code_points() {
        assert_eq!(code(validate(1, &mut send(&"é".repeat(4096)))), None);
        assert_eq!(
            code(validate(1, &mut send(&"é".repeat(4097)))).as_deref(),
            Some("MESSAGE_TOO_LONG")
        );
        assert_eq!(
            code(validate(1, &mut send("  "))).as_deref(),
            Some("MESSAGE_EMPTY")
        );
        // Postgres cannot store NUL: refused whether or not other text surrounds it.
        for nul in ["\0", "hello\0world"] {
            assert_eq!(
                code(validate(1, &mut send(nul))).as_deref(),
                Some("INPUT_TEXT_INVALID")
            );
        }
        let mut bad_peer = send("hi");
        bad_peer.peer = Some(types::InputPeer::user(0));
        assert_eq!(
            code(validate(1, &mut bad_peer)).as_deref(),
            Some("PEER_ID_INVALID")
        );
    }

    #[test]
    fn edits_follow_the_text_rules_of_a_send_but_may_empty_a_caption() {
        let edit = |owner: i64, peer: i64, id: i64, text: &str| {
            code(validate_edit(
                owner,
                &mut types::EditMessageRequest {
                    peer: Some(types::InputPeer::user(peer)),
                    id,
                    text: text.into(),
                    ..Default::default()
                },
            ))
        };
        let table: [(Option<String>, Option<&str>); 7] = [
            (edit(1, 2, 5, "fixed"), None),
            // An empty text is a caption of a message with a file, else MESSAGE_EMPTY: the
            // store decides, once it knows the message (edit::edit).
            (edit(1, 2, 5, "  "), None),
            (edit(1, 2, 5, &"é".repeat(4097)), Some("MESSAGE_TOO_LONG")),
            (edit(1, 2, 5, "a\0b"), Some("INPUT_TEXT_INVALID")),
            (edit(1, 2, 0, "fixed"), Some("MESSAGE_ID_INVALID")),
            (edit(1, 0, 5, "fixed"), Some("PEER_ID_INVALID")),
            (edit(0, 2, 5, "fixed"), Some("USER_ID_INVALID")),
        ];
        for (i, (got, want)) in table.into_iter().enumerate() {
            assert_eq!(got.as_deref(), want, "row {i}");
        }
    }

    #[test]
    fn history_requests_are_clamped() -> Result<(), Status> {
        let with = types::GetHistoryRequest {
            peer: Some(types::InputPeer::user(2)),
            ..Default::default()
        };
        let w = history_window(
            1,
            &types::GetHistoryRequest {
                limit: 500,
                add_offset: -1000,
                ..with
            },
        )?;
        assert_eq!((w.limit, w.add_offset), (100, -100));
        let w = history_window(1, &with)?;
        assert_eq!((w.limit, w.add_offset, w.peer), (20, 0, 2));
        let bad = history_window(1, &types::GetHistoryRequest { limit: -1, ..with });
        assert_eq!(
            bad.err()
                .and_then(|s| oxigram_errors::code_of(&s))
                .as_deref(),
            Some("LIMIT_INVALID")
        );
        Ok(())
    }

    #[test]
    fn search_requests_are_checked() {
        let ok = types::SearchRequest {
            q: "  hello ".into(),
            ..Default::default()
        };
        let table: Vec<(types::SearchRequest, Option<&str>)> = vec![
            (ok.clone(), None),
            (
                types::SearchRequest {
                    q: "".into(),
                    ..ok.clone()
                },
                Some("SEARCH_QUERY_EMPTY"),
            ),
            (
                types::SearchRequest {
                    q: " \t\n ".into(),
                    ..ok.clone()
                },
                Some("SEARCH_QUERY_EMPTY"),
            ),
            (
                types::SearchRequest {
                    q: "?!...".into(),
                    ..ok.clone()
                },
                Some("SEARCH_QUERY_EMPTY"),
            ),
            (
                types::SearchRequest {
                    q: " ab ".into(),
                    ..ok.clone()
                },
                Some("SEARCH_QUERY_TOO_SHORT"),
            ),
            (
                types::SearchRequest {
                    q: "a b-c d".into(),
                    ..ok.clone()
                },
                Some("SEARCH_QUERY_TOO_SHORT"),
            ),
            (
                types::SearchRequest {
                    q: "猫".into(),
                    ..ok.clone()
                },
                None,
            ),
            (
                types::SearchRequest {
                    q: "é".repeat(256),
                    ..ok.clone()
                },
                None,
            ),
            (
                types::SearchRequest {
                    q: "é".repeat(257),
                    ..ok.clone()
                },
                Some("SEARCH_QUERY_TOO_LONG"),
            ),
            (
                types::SearchRequest {
                    q: "a\0bc".into(),
                    ..ok.clone()
                },
                Some("INPUT_TEXT_INVALID"),
            ),
            (
                types::SearchRequest {
                    peer: Some(types::InputPeer::user(-1)),
                    ..ok.clone()
                },
                Some("PEER_ID_INVALID"),
            ),
            (
                types::SearchRequest {
                    peer: Some(types::InputPeer::default()),
                    ..ok.clone()
                },
                Some("PEER_ID_INVALID"),
            ),
            (
                types::SearchRequest {
                    peer: Some(types::InputPeer::me()),
                    ..ok.clone()
                },
                None,
            ),
            (
                types::SearchRequest {
                    from_user_id: -1,
                    ..ok.clone()
                },
                Some("USER_ID_INVALID"),
            ),
            (
                types::SearchRequest {
                    offset_id: -1,
                    ..ok.clone()
                },
                Some("OFFSET_INVALID"),
            ),
            (
                types::SearchRequest {
                    min_date: -1,
                    ..ok.clone()
                },
                Some("OFFSET_INVALID"),
            ),
            (
                types::SearchRequest {
                    max_date: -1,
                    ..ok.clone()
                },
                Some("OFFSET_INVALID"),
            ),
            (
                types::SearchRequest {
                    limit: -1,
                    ..ok.clone()
                },
                Some("LIMIT_INVALID"),
            ),
            (
                types::SearchRequest {
                    limit: 101,
                    ..ok.clone()
                },
                Some("LIMIT_INVALID"),
            ),
            (
                types::SearchRequest {
                    limit: 100,
                    ..ok.clone()
                },
                None,
            ),
        ];
        for (request, expected) in table {
            let got = search_query(1, request.clone())
                .err()
                .and_then(|s| oxigram_errors::code_of(&s));
            assert_eq!(got.as_deref(), expected, "{request:?}");
        }
        let q = search_query(1, ok).ok();
        let q = q
            .as_ref()
            .map(|q| (q.words.lead(), q.limit, q.max_date, q.below_id));
        assert_eq!(q, Some(("hello", 20, i64::MAX, i64::MAX)));
    }

    #[test]
    fn delete_requests_are_checked() {
        let ids = |owner: i64, ids: Vec<i64>| {
            delete_ids(owner, &types::DeleteMessagesRequest { ids, revoke: false })
        };
        // (request, the ids kept or the code)
        let table = [
            (ids(1, vec![3, 0, -2, 5]), Ok::<_, &str>(vec![3, 5])),
            (ids(1, vec![]), Ok(vec![])),
            (ids(1, (1..=1000).collect()), Ok((1..=1000).collect())),
            (ids(1, (1..=1001).collect()), Err("MESSAGE_IDS_TOO_MANY")),
            (ids(0, vec![1]), Err("USER_ID_INVALID")),
        ];
        for (i, (got, want)) in table.into_iter().enumerate() {
            let got = got.map_err(|s| oxigram_errors::code_of(&s).unwrap_or_default());
            assert_eq!(got, want.map_err(str::to_owned), "row {i}");
        }

        let history = |owner: i64, peer: Option<types::InputPeer>, max_id: i64| {
            history_targets(
                owner,
                &types::DeleteHistoryRequest {
                    peer,
                    max_id,
                    just_clear: true,
                    revoke: false,
                },
            )
            .map(|t| match t {
                Targets::History { peer, max_id, .. } => (peer, max_id),
                Targets::Ids(_) => (0, 0),
            })
            .map_err(|s| oxigram_errors::code_of(&s).unwrap_or_default())
        };
        let table = [
            (
                history(1, Some(types::InputPeer::user(2)), 0),
                Ok::<_, &str>((2, i64::MAX)),
            ),
            (history(1, Some(types::InputPeer::me()), 9), Ok((1, 9))),
            (history(1, None, 0), Err("PEER_ID_INVALID")),
            (
                history(1, Some(types::InputPeer::user(0)), 0),
                Err("PEER_ID_INVALID"),
            ),
            (
                history(1, Some(types::InputPeer::user(2)), -1),
                Err("MESSAGE_ID_INVALID"),
            ),
            (
                history(0, Some(types::InputPeer::user(2)), 0),
                Err("USER_ID_INVALID"),
            ),
        ];
        for (i, (got, want)) in table.into_iter().enumerate() {
            assert_eq!(got, want.map_err(str::to_owned), "row {i}");
        }
    }

    #[test]
    fn read_contents_requests_are_checked() {
        let ids = |owner: i64, ids: Vec<i64>| {
            contents_ids(owner, &types::ReadMessageContentsRequest { ids })
                .map_err(|s| oxigram_errors::code_of(&s).unwrap_or_default())
        };
        // (request, the ids kept or the code)
        let table = [
            (ids(1, vec![5, 0, -2, 3, 5]), Ok::<_, &str>(vec![3, 5])),
            (ids(1, vec![]), Ok(vec![])),
            (ids(1, (1..=1000).collect()), Ok((1..=1000).collect())),
            (ids(1, (1..=1001).collect()), Err("MESSAGE_IDS_TOO_MANY")),
            (ids(0, vec![1]), Err("USER_ID_INVALID")),
        ];
        for (i, (got, want)) in table.into_iter().enumerate() {
            assert_eq!(got, want.map_err(str::to_owned), "row {i}");
        }
    }

    #[test]
    fn reaction_requests_are_checked() {
        use types::InputPeer;
        let react = |owner: i64, peer: Option<InputPeer>, msg_id: i64, reaction: &str| {
            let r = types::SendReactionRequest {
                peer,
                msg_id,
                reaction: reaction.into(),
            };
            validate_reaction(owner, &r)
                .map_err(|s| oxigram_errors::code_of(&s).unwrap_or_default())
        };
        let bob = || Some(InputPeer::user(2));
        let long = "👍".repeat(MAX_REACTION_CODE_POINTS + 1);
        let longest = "👍".repeat(MAX_REACTION_CODE_POINTS);
        // (request, the dialog's user or the code)
        let table = [
            (react(1, bob(), 5, "👍"), Ok::<_, &str>(2)),
            (react(1, bob(), 5, ""), Ok(2)),
            (react(1, Some(InputPeer::me()), 5, "❤️"), Ok(1)),
            (react(1, bob(), 5, "👨‍👩‍👧‍👦"), Ok(2)),
            (react(1, bob(), 5, "#️⃣"), Ok(2)),
            (react(1, bob(), 5, &longest), Ok(2)),
            (react(1, bob(), 5, &long), Err("REACTION_INVALID")),
            (react(1, bob(), 5, "ok"), Err("REACTION_INVALID")),
            (react(1, bob(), 5, "👍 👍"), Err("REACTION_INVALID")),
            (react(1, bob(), 5, "👍\n"), Err("REACTION_INVALID")),
            (react(1, bob(), 5, "👍\0"), Err("INPUT_TEXT_INVALID")),
            (react(1, bob(), 0, "👍"), Err("MESSAGE_ID_INVALID")),
            (react(1, bob(), -3, "👍"), Err("MESSAGE_ID_INVALID")),
            (react(1, None, 5, "👍"), Err("PEER_ID_INVALID")),
            (
                react(1, Some(InputPeer::user(0)), 5, "👍"),
                Err("PEER_ID_INVALID"),
            ),
            (react(0, bob(), 5, "👍"), Err("USER_ID_INVALID")),
        ];
        for (i, (got, want)) in table.into_iter().enumerate() {
            assert_eq!(got, want.map_err(str::to_owned), "row {i}");
        }
    }

    #[test]
    fn the_same_request_hashes_alike() {
        assert_eq!(request_hash(2, &send("a")), request_hash(2, &send("a")));
        assert_ne!(request_hash(2, &send("a")), request_hash(2, &send("b")));
        assert_ne!(request_hash(2, &send("a")), request_hash(3, &send("a")));
    }
}
