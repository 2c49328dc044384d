//! The Dialogs gRPC service.

use oxigram_errors::{Error, ErrorCode, check_text, status};
use oxigram_outbox::{FastPath, Outbox};
use oxigram_proto::{
    dialog_rules::MUTE_FOREVER,
    dialogs::v1::{
        ApplyEventsRequest, ApplyEventsResponse, EditPeerFoldersRequest, GetDialogFiltersRequest,
        GetDialogsRequest, GetNotifySettingsRequest, GetOutboxReadDateRequest,
        GetPeerDialogsRequest, GetPeerSettingsRequest, HidePeerSettingsBarRequest,
        MarkDialogUnreadRequest, ReadHistoryRequest, ReceivedMessagesRequest,
        ReorderPinnedDialogsRequest, SaveDraftRequest, ToggleDialogPinRequest,
        UpdateDialogFilterRequest, UpdateDialogFiltersOrderRequest, UpdateNotifySettingsRequest,
        dialogs_server::Dialogs,
    },
    dialogs_hash, require_peer,
    types::v1::{
        AffectedMessages, DialogFilters, DialogsPage, DraftMessage, FolderPeer, OutboxReadDate,
        Peer, PeerNotifySettings, PeerSettings, PtsUpdate, ReceivedMessagesResponse,
        UpdateDialogFilter, UpdateDialogFilterOrder, UpdateDialogPinned, UpdateDialogUnreadMark,
        UpdateDraftMessage, UpdateFolderPeers, UpdateNotifySettings, UpdatePeerSettingsBarHidden,
        UpdatePinnedDialogs, update,
    },
};
use sqlx::PgPool;
use tonic::{Request, Response, Status};

use crate::{
    filters,
    outbound::ToUpdates,
    projection,
    read::{self, Read},
    settings::{self, Logger},
    store,
};

/// Most dialogs one page returns.
pub const MAX_DIALOGS_LIMIT: i32 = 100;
/// Most peers one GetPeerDialogs or EditPeerFolders names.
pub const MAX_PEERS: usize = 100;
/// Longest draft, in Unicode code points (a message's longest text).
pub const MAX_DRAFT_CODE_POINTS: usize = 4096;
/// Most events one ApplyEvents may carry.
pub const MAX_EVENTS: usize = 1000;
// Every outbox delivery to this service must fit in one call.
const _: () = assert!(MAX_EVENTS >= oxigram_outbox::MAX_CALL);

pub struct DialogsService {
    pool: PgPool,
    outbox: Outbox,
    to_updates: ToUpdates,
    /// Events that applying the log makes for other users' logs, handed on after commit.
    derived: FastPath,
}

impl DialogsService {
    pub fn new(pool: PgPool, outbox: Outbox, to_updates: ToUpdates, derived: FastPath) -> Self {
        Self {
            pool,
            outbox,
            to_updates,
            derived,
        }
    }

    fn logger(&self) -> Logger<'_> {
        Logger {
            pool: &self.pool,
            outbox: &self.outbox,
            to_updates: &self.to_updates,
        }
    }

    /// Logs a settings change and answers its update.
    async fn log(
        &self,
        owner: i64,
        auth_key_id: i64,
        kind: update::Kind,
    ) -> Result<Response<PtsUpdate>, Status> {
        Ok(Response::new(
            self.logger().log(owner, auth_key_id, kind).await?,
        ))
    }
}

/// A page answered: its hash, and nothing but the count and hash when the client holds it.
fn answer_page(
    dialogs: Vec<oxigram_proto::types::v1::Dialog>,
    count: i32,
    hash: i64,
) -> DialogsPage {
    let page_hash = dialogs_hash(&dialogs);
    if hash != 0 && hash == page_hash {
        return DialogsPage {
            dialogs: Vec::new(),
            count,
            hash: page_hash,
            not_modified: true,
        };
    }
    DialogsPage {
        dialogs,
        count,
        hash: page_hash,
        not_modified: false,
    }
}

#[tonic::async_trait]
impl Dialogs for DialogsService {
    async fn apply_events(
        &self,
        request: Request<ApplyEventsRequest>,
    ) -> Result<Response<ApplyEventsResponse>, Status> {
        let events = request.into_inner().events;
        if events.len() > MAX_EVENTS {
            return Err(status(ErrorCode::LimitInvalid, "too many events"));
        }
        for e in &events {
            if uuid::Uuid::parse_str(&e.event_id).is_err() {
                return Err(status(ErrorCode::RandomIdInvalid, "event_id is not a UUID"));
            }
            if e.pts < e.pts_count || e.pts_count < 1 {
                return Err(status(
                    ErrorCode::PtsInvalid,
                    "an event to apply carries the pts its log gave it",
                ));
            }
        }
        let applied = projection::apply(&self.pool, &self.outbox, events)
            .await
            .map_err(Error::from)?;
        let (ids, rows) = applied.derived;
        if !ids.is_empty() {
            self.derived.hand_off(ids, rows);
        }
        if applied.held > 0 {
            // The outbox delivers them again, once the events before them are here.
            return Err(status(
                ErrorCode::EventsAheadOfGap,
                "events ahead of a gap in their user's pts wait for the missing ones",
            ));
        }
        Ok(Response::new(ApplyEventsResponse {
            applied: applied.applied,
        }))
    }

    async fn get_dialogs(
        &self,
        request: Request<GetDialogsRequest>,
    ) -> Result<Response<DialogsPage>, Status> {
        let GetDialogsRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        let limit = oxigram_errors::page_limit(r.limit, 20, MAX_DIALOGS_LIMIT)?;
        // The seek key's peer as the previous page gave it; none is 0, which continues after
        // every dialog of that top message date and id.
        let offset_peer = r.offset_peer.as_ref().and_then(Peer::user_id).unwrap_or(0);
        if r.offset_date < 0 || r.offset_id < 0 || offset_peer < 0 {
            return Err(status(
                ErrorCode::OffsetInvalid,
                "offsets must not be negative",
            ));
        }
        // No offset at all: a dialog without a message has date and id 0, so a page may end
        // on one and the next page's key is its peer alone.
        let first = r.offset_date == 0 && r.offset_id == 0 && offset_peer == 0 && !r.offset_pinned;
        if r.filter_id != 0 {
            filters::check_id(r.filter_id)?;
            let filter = filters::filter(&self.pool, owner_id, r.filter_id)
                .await
                .map_err(Error::from)?
                .ok_or_else(|| status(ErrorCode::FilterIdInvalid, "no such filter"))?;
            let offset = if first {
                filters::Offset::First
            } else if r.offset_pinned {
                filters::Offset::AfterPinned(offset_peer)
            } else {
                filters::Offset::After(r.offset_date, r.offset_id, offset_peer)
            };
            let (dialogs, count) = filters::page(&self.pool, owner_id, &filter, offset, limit)
                .await
                .map_err(Error::from)?;
            return Ok(Response::new(answer_page(dialogs, count, r.hash)));
        }
        settings::check_folder(r.folder_id)?;
        let after = if first {
            store::FIRST_KEY
        } else if r.offset_pinned {
            // A peer no longer pinned there continues with the unpinned dialogs.
            let rank = store::pinned_rank(&self.pool, owner_id, r.folder_id, offset_peer)
                .await
                .map_err(Error::from)?;
            if rank > 0 {
                (rank, r.offset_date, r.offset_id, offset_peer)
            } else {
                (1, i64::MIN, i64::MIN, i64::MIN)
            }
        } else {
            (0, r.offset_date, r.offset_id, offset_peer)
        };
        if !first {
            // Counted on the first page only: on later ones it would be most of their cost.
            let dialogs = store::page(
                &self.pool,
                owner_id,
                r.folder_id,
                after,
                limit,
                r.include_empty,
            )
            .await
            .map_err(Error::from)?;
            return Ok(Response::new(answer_page(dialogs, 0, r.hash)));
        }
        // The first page and its count in one statement, so a dialog arriving meanwhile is
        // either listed and counted or neither.
        let (dialogs, count) =
            store::first_page(&self.pool, owner_id, r.folder_id, limit, r.include_empty)
                .await
                .map_err(Error::from)?;
        Ok(Response::new(answer_page(dialogs, count, r.hash)))
    }

    async fn get_peer_dialogs(
        &self,
        request: Request<GetPeerDialogsRequest>,
    ) -> Result<Response<DialogsPage>, Status> {
        let GetPeerDialogsRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        if r.peers.len() > MAX_PEERS {
            return Err(status(
                ErrorCode::LimitInvalid,
                &format!("at most {MAX_PEERS} peers"),
            ));
        }
        let peers = r
            .peers
            .iter()
            .map(|p| require_peer(Some(p), owner_id))
            .collect::<Result<Vec<_>, _>>()?;
        let dialogs = store::peer_dialogs(&self.pool, owner_id, &peers)
            .await
            .map_err(Error::from)?;
        let count = dialogs.len() as i32;
        Ok(Response::new(answer_page(dialogs, count, 0)))
    }

    async fn toggle_dialog_pin(
        &self,
        request: Request<ToggleDialogPinRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let ToggleDialogPinRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        settings::check_pin(&self.pool, owner_id, peer, r.pinned).await?;
        let kind = update::Kind::DialogPinned(UpdateDialogPinned {
            peer: Some(Peer::user(peer)),
            pinned: r.pinned,
        });
        self.log(owner_id, auth_key_id, kind).await
    }

    async fn reorder_pinned_dialogs(
        &self,
        request: Request<ReorderPinnedDialogsRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let ReorderPinnedDialogsRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let order = r
            .order
            .iter()
            .map(|p| require_peer(Some(p), owner_id))
            .collect::<Result<Vec<_>, _>>()?;
        let order =
            settings::pinned_order(&self.pool, owner_id, r.folder_id, order, r.force).await?;
        let kind = update::Kind::PinnedDialogs(UpdatePinnedDialogs {
            folder_id: r.folder_id,
            order: order.into_iter().map(Peer::user).collect(),
        });
        self.log(owner_id, auth_key_id, kind).await
    }

    async fn edit_peer_folders(
        &self,
        request: Request<EditPeerFoldersRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let EditPeerFoldersRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        if r.folder_peers.is_empty() || r.folder_peers.len() > MAX_PEERS {
            return Err(status(
                ErrorCode::LimitInvalid,
                &format!("from 1 to {MAX_PEERS} peers"),
            ));
        }
        let mut moves: Vec<FolderPeer> = Vec::with_capacity(r.folder_peers.len());
        for fp in &r.folder_peers {
            let peer = require_peer(fp.peer.as_ref(), owner_id)?;
            settings::check_folder(fp.folder_id)?;
            // The last word on a peer counts: the update names each peer once, so applying
            // it at once or one by one gives the same.
            moves.retain(|m| m.peer_user() != peer);
            moves.push(FolderPeer {
                peer: Some(Peer::user(peer)),
                folder_id: fp.folder_id,
            });
        }
        let kind = update::Kind::FolderPeers(UpdateFolderPeers {
            folder_peers: moves,
        });
        self.log(owner_id, auth_key_id, kind).await
    }

    async fn mark_dialog_unread(
        &self,
        request: Request<MarkDialogUnreadRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let MarkDialogUnreadRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        let kind = update::Kind::DialogUnreadMark(UpdateDialogUnreadMark {
            peer: Some(Peer::user(peer)),
            unread: r.unread,
        });
        self.log(owner_id, auth_key_id, kind).await
    }

    async fn update_notify_settings(
        &self,
        request: Request<UpdateNotifySettingsRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let UpdateNotifySettingsRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        let settings = r.settings.unwrap_or_default();
        if !(0..=MUTE_FOREVER).contains(&settings.mute_until) {
            return Err(status(
                ErrorCode::NotifySettingsInvalid,
                "mute_until is from 0 to MUTE_FOREVER",
            ));
        }
        let kind = update::Kind::NotifySettings(UpdateNotifySettings {
            peer: Some(Peer::user(peer)),
            settings: Some(settings),
        });
        self.log(owner_id, auth_key_id, kind).await
    }

    async fn get_notify_settings(
        &self,
        request: Request<GetNotifySettingsRequest>,
    ) -> Result<Response<PeerNotifySettings>, Status> {
        let GetNotifySettingsRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        let settings = store::notify_settings(&self.pool, owner_id, peer)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(settings))
    }

    async fn save_draft(
        &self,
        request: Request<SaveDraftRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let SaveDraftRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        check_text("text", &r.text)?;
        if r.text.chars().count() > MAX_DRAFT_CODE_POINTS {
            return Err(status(
                ErrorCode::MessageTooLong,
                &format!("a draft has at most {MAX_DRAFT_CODE_POINTS} characters"),
            ));
        }
        if r.reply_to_msg_id < 0 {
            return Err(status(
                ErrorCode::MessageIdInvalid,
                "reply_to_msg_id must not be negative",
            ));
        }
        // An empty draft (no text, no reply) clears it.
        let draft = if r.text.trim().is_empty() && r.reply_to_msg_id == 0 {
            None
        } else {
            let entities = svc_messages::entities::checked(&r.text, r.entities)?;
            Some(DraftMessage {
                text: r.text,
                entities,
                reply_to_msg_id: r.reply_to_msg_id,
                date: chrono::Utc::now().timestamp(),
                pts: 0,
            })
        };
        let kind = update::Kind::DraftMessage(UpdateDraftMessage {
            peer: Some(Peer::user(peer)),
            draft,
            clears_pts: 0,
        });
        self.log(owner_id, auth_key_id, kind).await
    }

    async fn get_peer_settings(
        &self,
        request: Request<GetPeerSettingsRequest>,
    ) -> Result<Response<PeerSettings>, Status> {
        let GetPeerSettingsRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        let bar = store::settings_bar(&self.pool, owner_id, peer)
            .await
            .map_err(Error::from)?;
        // The bar is for a stranger who wrote first: the owner never wrote, and did not hide it.
        let shown = peer != owner_id
            && bar.is_some_and(|(peer_wrote, owner_wrote, hidden)| {
                peer_wrote && !owner_wrote && !hidden
            });
        Ok(Response::new(PeerSettings {
            report_spam: shown,
            block_contact: shown,
            add_contact: shown,
        }))
    }

    async fn hide_peer_settings_bar(
        &self,
        request: Request<HidePeerSettingsBarRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let HidePeerSettingsBarRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        let kind = update::Kind::PeerSettingsBarHidden(UpdatePeerSettingsBarHidden {
            peer: Some(Peer::user(peer)),
        });
        self.log(owner_id, auth_key_id, kind).await
    }

    async fn update_dialog_filter(
        &self,
        request: Request<UpdateDialogFilterRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let UpdateDialogFilterRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        filters::check_id(r.id)?;
        let existing = filters::filters(&self.pool, owner_id)
            .await
            .map_err(Error::from)?;
        let exists = existing.iter().any(|f| f.id == r.id);
        let filter = match r.filter {
            Some(filter) => {
                if !exists && existing.len() >= filters::MAX_DIALOG_FILTERS {
                    return Err(status(
                        ErrorCode::DialogFiltersTooMuch,
                        &format!("at most {} dialog filters", filters::MAX_DIALOG_FILTERS),
                    ));
                }
                Some(filters::checked(r.id, filter)?)
            }
            None if exists => None,
            None => return Err(status(ErrorCode::FilterIdInvalid, "no such filter")),
        };
        let kind = update::Kind::DialogFilter(UpdateDialogFilter { id: r.id, filter });
        self.log(owner_id, auth_key_id, kind).await
    }

    async fn update_dialog_filters_order(
        &self,
        request: Request<UpdateDialogFiltersOrderRequest>,
    ) -> Result<Response<PtsUpdate>, Status> {
        let UpdateDialogFiltersOrderRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let mut existing: Vec<i32> = filters::filters(&self.pool, owner_id)
            .await
            .map_err(Error::from)?
            .iter()
            .map(|f| f.id)
            .collect();
        let mut asked = r.order.clone();
        existing.sort_unstable();
        asked.sort_unstable();
        if asked != existing {
            return Err(status(
                ErrorCode::FilterIdInvalid,
                "the order names every filter of the caller's, once each",
            ));
        }
        let kind = update::Kind::DialogFilterOrder(UpdateDialogFilterOrder { order: r.order });
        self.log(owner_id, auth_key_id, kind).await
    }

    async fn get_dialog_filters(
        &self,
        request: Request<GetDialogFiltersRequest>,
    ) -> Result<Response<DialogFilters>, Status> {
        let owner_id = request.into_inner().owner_id;
        let filters = filters::filters(&self.pool, owner_id)
            .await
            .map_err(Error::from)?;
        Ok(Response::new(DialogFilters { filters }))
    }

    async fn read_history(
        &self,
        request: Request<ReadHistoryRequest>,
    ) -> Result<Response<AffectedMessages>, Status> {
        let ReadHistoryRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        check_max_id(r.max_id)?;
        let read = read::read_history(
            &self.pool,
            &self.outbox,
            &self.to_updates,
            owner_id,
            peer,
            r.max_id,
            auth_key_id,
        )
        .await?;
        if let Read::Unchanged = read {
            // Nothing new to read, but a read takes the unread mark away: log that alone.
            let marked = store::dialog_rows(&self.pool, owner_id, &[peer])
                .await
                .map_err(Error::from)?
                .iter()
                .any(store::DialogRow::unread_marked);
            if marked {
                let kind = update::Kind::DialogUnreadMark(UpdateDialogUnreadMark {
                    peer: Some(Peer::user(peer)),
                    unread: false,
                });
                let logged = self.logger().log(owner_id, auth_key_id, kind).await?;
                return Ok(Response::new(AffectedMessages {
                    pts: logged.pts,
                    pts_count: 1,
                }));
            }
        }
        Ok(Response::new(match read {
            Read::Unchanged => AffectedMessages {
                pts: 0,
                pts_count: 0,
            },
            Read::Logged { pts } => AffectedMessages { pts, pts_count: 1 },
        }))
    }

    async fn get_outbox_read_date(
        &self,
        request: Request<GetOutboxReadDateRequest>,
    ) -> Result<Response<OutboxReadDate>, Status> {
        let GetOutboxReadDateRequest { owner_id, request } = request.into_inner();
        let r = request.unwrap_or_default();
        let peer = require_peer(r.peer.as_ref(), owner_id)?;
        let date = store::outbox_read_date(&self.pool, owner_id, peer, r.msg_id)
            .await
            .map_err(Error::from)?
            .ok_or_else(|| status(ErrorCode::MessageNotReadYet, "the peer has not read it yet"))?;
        Ok(Response::new(OutboxReadDate { date }))
    }

    async fn received_messages(
        &self,
        request: Request<ReceivedMessagesRequest>,
    ) -> Result<Response<ReceivedMessagesResponse>, Status> {
        let ReceivedMessagesRequest {
            owner_id,
            auth_key_id,
            request,
        } = request.into_inner();
        let r = request.unwrap_or_default();
        check_max_id(r.max_id)?;
        let (max_id, moved) =
            store::received(&self.pool, &self.outbox, owner_id, auth_key_id, r.max_id)
                .await
                .map_err(Error::from)?;
        if let Some(moved) = moved {
            // The receipts go to the senders, not to the caller: no pts to report back.
            self.to_updates
                .fast_path(&self.outbox, moved.events, &moved.rows)
                .await;
        }
        Ok(Response::new(ReceivedMessagesResponse { max_id }))
    }
}

/// `MESSAGE_ID_INVALID` for a negative `max_id` (0 means "everything so far").
fn check_max_id(max_id: i64) -> Result<(), Status> {
    if max_id < 0 {
        return Err(status(
            ErrorCode::MessageIdInvalid,
            "max_id must not be negative",
        ));
    }
    Ok(())
}
