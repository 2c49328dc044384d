//! A device's local copy of its account, built only from what the device receives: per dialog
//! the messages it knows (in the account's own box ids), the top message, the read and
//! delivered watermarks and the unread count, and the owner's settings of it (folder, pinned
//! order, unread mark, notification settings, draft, hidden peer settings bar), with her dialog filters and their
//! order, kept by the same rules svc-dialogs keeps them.
//!
//! Feed it every update in pts order, each once: the [`Event`]s an [`UpdateStream`] yields
//! ([`Mirror::follow`]), or the updates a [`Sequencer`] hands to its callback
//! ([`Mirror::apply`]). A difference's new messages arrive in their current state (the
//! sequencer puts them into their updates), so the copy converges whatever the path. When the
//! log no longer holds what the device missed (`too_long`), the copy is marked stale and
//! [`Mirror::reload`] rebuilds it from `GetDialogs` (both folders, with the dialogs that have
//! no message yet), `GetHistory` and `GetDialogFilters`. It also keeps the account's own
//! profile, privacy rules and contacts as their updates describe them.
//!
//! [`UpdateStream`]: crate::UpdateStream
//! [`Sequencer`]: crate::Sequencer

use std::collections::{BTreeMap, HashMap, HashSet};

use oxigram_proto::{
    api::v1::{GetContactsRequest, GetDialogsRequest, GetHistoryRequest},
    dialog_rules::{FOLDER_ARCHIVE, FOLDER_MAIN, MAX_PINNED_DIALOGS, filter_order},
    types::v1::{
        Dialog, DialogFilter, DraftMessage, InputPeer, Message, Peer, PeerNotifySettings,
        PrivacyRule, PtsUpdate, UpdateMessageReactions, User, privacy_rule, update,
    },
};

use crate::{Client, Error, Event};

/// Dialogs and messages per page when reloading (the API's largest page).
const RELOAD_PAGE: i32 = 100;

/// One dialog as the device knows it; the ids are the owner's box ids.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocalDialog {
    /// The user of the dialog's peer (the owner herself for Saved Messages): private chats
    /// are the only dialogs, so the copy keys them by it.
    pub peer_user_id: i64,
    pub top_message_id: i64,
    pub top_message_date: i64,
    pub read_inbox_max_id: i64,
    pub read_outbox_max_id: i64,
    pub delivered_outbox_max_id: i64,
    pub unread_count: i32,
    /// 0 the main list, 1 the archive.
    pub folder_id: i32,
    /// Its place among the folder's pinned dialogs: 0 not pinned, the higher the nearer the
    /// top (only the order means something).
    pub pinned_rank: i64,
    pub unread_mark: bool,
    pub notify_settings: PeerNotifySettings,
    pub draft: Option<DraftMessage>,
    /// The owner hid the dialog's peer settings bar.
    pub settings_bar_hidden: bool,
    /// Reactions of the peer to the owner's messages she has not seen.
    pub unread_reactions_count: i32,
    /// The dialog's messages the device knows, by box id.
    pub messages: BTreeMap<i64, Message>,
}

impl LocalDialog {
    fn new(peer_user_id: i64) -> Self {
        Self {
            peer_user_id,
            ..Self::default()
        }
    }

    /// The dialog as `GetDialogs` lists it.
    pub fn dialog(&self) -> Dialog {
        Dialog {
            peer: Some(Peer::user(self.peer_user_id)),
            top_message_id: self.top_message_id,
            top_message_date: self.top_message_date,
            read_inbox_max_id: self.read_inbox_max_id,
            read_outbox_max_id: self.read_outbox_max_id,
            unread_count: self.unread_count,
            delivered_outbox_max_id: self.delivered_outbox_max_id,
            pinned: self.pinned_rank > 0,
            folder_id: self.folder_id,
            unread_mark: self.unread_mark,
            notify_settings: (self.notify_settings != PeerNotifySettings::default())
                .then_some(self.notify_settings),
            draft: self.draft.clone(),
            settings_bar_hidden: self.settings_bar_hidden,
            unread_reactions_count: self.unread_reactions_count,
        }
    }

    /// Listed by `GetDialogs`: it has a top message.
    fn listed(&self) -> bool {
        self.top_message_id > 0
    }

    /// An incoming message above the read watermark is unread, as svc-dialogs counts it.
    fn counts_as_unread(&self, m: &Message) -> bool {
        !m.out && m.id > self.read_inbox_max_id
    }

    /// The newest remaining message becomes the top one (none left: no top message, and
    /// `GetDialogs` leaves the dialog out).
    fn recompute_top(&mut self) {
        (self.top_message_id, self.top_message_date) = self
            .messages
            .last_key_value()
            .map_or((0, 0), |(id, m)| (*id, m.date));
    }
}

/// What the copy met that it could not apply as the log describes it. All zero on a device
/// that applied its whole log once, in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MirrorStats {
    /// New messages whose id the copy already held (kept once, in their newer state).
    pub duplicates: u64,
    /// Edits of messages the copy does not hold (they predate it): skipped.
    pub unknown_edits: u64,
    /// Deletions of ids the copy does not hold: messages deleted before the device saw them
    /// (a getDifference leaves them out), or whose new-message update comes later.
    pub unknown_deletes: u64,
    /// New messages that arrived after their deletion: left out.
    pub arrived_deleted: u64,
    /// Updates without a kind.
    pub empty: u64,
}

/// The local state of one device's account. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct Mirror {
    dialogs: BTreeMap<i64, LocalDialog>,
    /// The dialog of every box id held: a deletion names ids only (box ids are unique per
    /// owner across her dialogs).
    dialog_of: HashMap<i64, i64>,
    /// Ids deleted before the copy held them. A message's new-message update may be logged
    /// after its deletion (the two are handed to the log apart), and box ids are never
    /// reused: a message arriving under one of these ids was deleted already.
    deleted_unseen: HashSet<i64>,
    /// The dialog filters by id, with their place in the owner's order.
    filters: BTreeMap<i32, (i32, DialogFilter)>,
    stale: bool,
    stats: MirrorStats,
    /// The account's own profile, as its last profile update gave it.
    profile: Option<User>,
    /// The account's privacy rules by key, as their updates gave them.
    privacy: BTreeMap<i32, PrivacyRule>,
    /// The account's contacts and her names for them, by user id.
    contacts: BTreeMap<i64, (String, String)>,
}

impl Mirror {
    /// An empty copy: right for a device that starts at pts 0, or one that only shows what
    /// happens from its state on.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one event of an [`UpdateStream`](crate::UpdateStream): an update is applied,
    /// a `TooLong` marks the copy stale (call [`reload`](Self::reload)); the rest changes
    /// nothing here.
    pub fn follow(&mut self, event: &Event) {
        match event {
            Event::Update(applied) => self.apply(&applied.update),
            Event::TooLong { .. } => self.stale = true,
            Event::Gap { .. }
            | Event::Resumed { .. }
            | Event::Paced { .. }
            | Event::Failed { .. }
            | Event::Typing(_)
            | Event::Status(_)
            | Event::User(_) => {}
        }
    }

    /// Applies the next update of the account's log: the one place each update kind changes
    /// the copy.
    pub fn apply(&mut self, update: &PtsUpdate) {
        let Some(kind) = update.update.as_ref().and_then(|u| u.kind.as_ref()) else {
            self.stats.empty += 1;
            return;
        };
        match kind {
            update::Kind::NewMessage(new) => {
                if let Some(m) = &new.message {
                    self.new_message(m);
                }
            }
            update::Kind::EditMessage(edit) => {
                if let Some(m) = &edit.message {
                    self.edit_message(m);
                }
            }
            update::Kind::ReadHistoryInbox(read) => {
                self.read_inbox(read.peer_user(), read.max_id, read.still_unread_count);
            }
            update::Kind::ReadHistoryOutbox(read) => {
                let d = self.dialog_mut(read.peer_user());
                d.read_outbox_max_id = d.read_outbox_max_id.max(read.max_id);
            }
            update::Kind::DeliveredOutbox(delivered) => {
                let d = self.dialog_mut(delivered.peer_user());
                d.delivered_outbox_max_id = d.delivered_outbox_max_id.max(delivered.max_id);
            }
            update::Kind::DeleteMessages(deleted) => self.delete_messages(&deleted.ids),
            update::Kind::ReadMessageContents(read) => self.read_contents(&read.messages),
            update::Kind::MessageReactions(u) => self.reactions(u),
            update::Kind::ReadReactions(u) => {
                let d = self.dialog_mut(u.peer_user());
                d.unread_reactions_count = 0;
                for id in &u.messages {
                    if let Some(m) = d.messages.get_mut(id) {
                        m.reaction_unread = false;
                    }
                }
            }
            update::Kind::DialogPinned(u) => self.pin(u.peer_user(), u.pinned),
            update::Kind::PinnedDialogs(u) => {
                let order: Vec<i64> = u.order.iter().filter_map(Peer::user_id).collect();
                self.pinned_order(u.folder_id, &order);
            }
            update::Kind::FolderPeers(u) => {
                for fp in &u.folder_peers {
                    let d = self.dialog_mut(fp.peer_user());
                    if d.folder_id != fp.folder_id {
                        d.folder_id = fp.folder_id;
                        d.pinned_rank = 0;
                    }
                }
            }
            update::Kind::DialogUnreadMark(u) => {
                self.dialog_mut(u.peer_user()).unread_mark = u.unread
            }
            update::Kind::NotifySettings(u) => {
                self.dialog_mut(u.peer_user()).notify_settings = u.settings.unwrap_or_default();
            }
            update::Kind::DraftMessage(u) => match &u.draft {
                Some(draft) => {
                    self.dialog_mut(u.peer_user()).draft = Some(DraftMessage {
                        pts: update.pts,
                        ..draft.clone()
                    });
                }
                None => {
                    if let Some(d) = self.dialogs.get_mut(&u.peer_user()) {
                        let saved_at = d.draft.as_ref().map(|d| d.pts);
                        if u.clears_pts == 0 || saved_at == Some(u.clears_pts) {
                            d.draft = None;
                        }
                    }
                }
            },
            update::Kind::PeerSettingsBarHidden(u) => {
                self.dialog_mut(u.peer_user()).settings_bar_hidden = true;
            }
            update::Kind::DialogFilter(u) => match &u.filter {
                Some(filter) => {
                    let next = self.filters.values().map(|f| f.0).max().unwrap_or(0) + 1;
                    let position = self.filters.get(&u.id).map_or(next, |f| f.0);
                    self.filters.insert(u.id, (position, filter.clone()));
                }
                None => {
                    self.filters.remove(&u.id);
                }
            },
            update::Kind::DialogFilterOrder(u) => {
                let current: Vec<i32> = self.filters().iter().map(|f| f.id).collect();
                for (i, id) in filter_order(&current, &u.order).iter().enumerate() {
                    if let Some(f) = self.filters.get_mut(id) {
                        f.0 = i as i32 + 1;
                    }
                }
            }
            update::Kind::Profile(profile) => self.profile = profile.user.clone(),
            update::Kind::Privacy(privacy) => {
                if let Some(rule) = &privacy.rule {
                    self.privacy.insert(rule.key, rule.clone());
                }
            }
            update::Kind::Contact(contact) => {
                if contact.deleted {
                    self.contacts.remove(&contact.user_id);
                } else {
                    let names = (contact.first_name.clone(), contact.last_name.clone());
                    self.contacts.insert(contact.user_id, names);
                }
            }
        }
    }

    /// Pins a dialog at the head of its folder (a dialog pinned already stays where it is;
    /// a full folder pins nothing more), or unpins it, as svc-dialogs does.
    fn pin(&mut self, peer: i64, pinned: bool) {
        if !pinned {
            if let Some(d) = self.dialogs.get_mut(&peer) {
                d.pinned_rank = 0;
            }
            return;
        }
        let folder = self.dialogs.get(&peer).map_or(FOLDER_MAIN, |d| d.folder_id);
        let in_folder = self
            .dialogs
            .values()
            .filter(|d| d.folder_id == folder && d.pinned_rank > 0);
        let (count, top) = in_folder.fold((0, 0), |(n, top), d| (n + 1, d.pinned_rank.max(top)));
        let d = self.dialog_mut(peer);
        if d.pinned_rank == 0 && count < MAX_PINNED_DIALOGS {
            d.pinned_rank = top + 1;
        }
    }

    /// A folder's pinned dialogs become exactly `order` (of the dialogs in the folder).
    fn pinned_order(&mut self, folder: i32, order: &[i64]) {
        for d in self.dialogs.values_mut().filter(|d| d.folder_id == folder) {
            d.pinned_rank = order
                .iter()
                .position(|p| *p == d.peer_user_id)
                .map_or(0, |i| (order.len() - i) as i64);
        }
    }

    /// The account's own profile as the updates applied gave it (`None` before any).
    pub fn profile(&self) -> Option<&User> {
        self.profile.as_ref()
    }

    /// The account's privacy rules the updates applied set, by key.
    pub fn privacy(&self) -> &BTreeMap<i32, PrivacyRule> {
        &self.privacy
    }

    /// The account's contacts and her (first, last) names for them, by user id.
    pub fn contacts(&self) -> &BTreeMap<i64, (String, String)> {
        &self.contacts
    }

    /// A new message (one of ours too): the dialog appears if it was not there, the message
    /// becomes its top when newest, and counts as unread when incoming above the watermark.
    fn new_message(&mut self, m: &Message) {
        if self.deleted_unseen.remove(&m.id) {
            self.stats.arrived_deleted += 1;
            return;
        }
        self.dialog_of.insert(m.id, m.peer_user());
        let d = self.dialog_mut(m.peer_user());
        if m.id > d.top_message_id {
            (d.top_message_id, d.top_message_date) = (m.id, m.date);
        }
        let unread = d.counts_as_unread(m);
        if d.messages.insert(m.id, m.clone()).is_some() {
            self.stats.duplicates += 1;
        } else if unread {
            d.unread_count += 1;
        }
    }

    /// An edit carries the whole message as it is now.
    fn edit_message(&mut self, m: &Message) {
        let held = self
            .dialogs
            .get_mut(&m.peer_user())
            .and_then(|d| d.messages.get_mut(&m.id));
        match held {
            Some(held) => *held = m.clone(),
            None => self.stats.unknown_edits += 1,
        }
    }

    /// The owner read the dialog (on this device or another): the watermark only moves
    /// forward, and the unread count becomes what the read left, which svc-dialogs counted
    /// against the same log. A read of a dialog the copy lacks changes nothing, as on the
    /// server.
    fn read_inbox(&mut self, peer: i64, max_id: i64, still_unread_count: i32) {
        if let Some(d) = self.dialogs.get_mut(&peer) {
            d.read_inbox_max_id = d.read_inbox_max_id.max(max_id);
            d.unread_count = still_unread_count;
            d.unread_mark = false;
        }
    }

    /// The contents of messages of the owner's were played (her ids, any dialogs): they are
    /// unplayed no more. Ids the copy lacks change nothing.
    fn read_contents(&mut self, ids: &[i64]) {
        for id in ids {
            let held = self
                .dialog_of
                .get(id)
                .and_then(|peer| self.dialogs.get_mut(peer))
                .and_then(|d| d.messages.get_mut(id));
            if let Some(m) = held {
                m.media_unread = false;
            }
        }
    }

    /// The reactions to a message of the owner's changed: a message the copy holds shows them,
    /// and the dialog counts its unread reactions as svc-dialogs does, by the change of the
    /// message's flag (a message the copy lacks moves nothing).
    fn reactions(&mut self, u: &UpdateMessageReactions) {
        let d = self.dialog_mut(u.peer_user());
        if let Some(m) = d.messages.get_mut(&u.msg_id) {
            let moved = i32::from(u.reaction_unread) - i32::from(m.reaction_unread);
            m.reactions.clone_from(&u.reactions);
            m.reaction_unread = u.reaction_unread;
            d.unread_reactions_count += moved;
        }
    }

    /// Messages deleted from the owner's boxes, by her ids (any dialogs): each one unread
    /// stops counting, and the dialogs they were in get their newest remaining message as
    /// top (none left: `GetDialogs` leaves the dialog out until a new message arrives).
    pub fn delete_messages(&mut self, ids: &[i64]) {
        let mut touched = Vec::new();
        for id in ids {
            let Some(d) = self
                .dialog_of
                .remove(id)
                .and_then(|peer| self.dialogs.get_mut(&peer))
            else {
                self.stats.unknown_deletes += 1;
                self.deleted_unseen.insert(*id);
                continue;
            };
            if let Some(m) = d.messages.remove(id) {
                if d.counts_as_unread(&m) {
                    d.unread_count = (d.unread_count - 1).max(0);
                }
                d.unread_reactions_count -= i32::from(m.reaction_unread);
                touched.push(d.peer_user_id);
            }
        }
        for peer in touched {
            if let Some(d) = self.dialogs.get_mut(&peer) {
                d.recompute_top();
            }
        }
    }

    fn dialog_mut(&mut self, peer: i64) -> &mut LocalDialog {
        self.dialogs
            .entry(peer)
            .or_insert_with(|| LocalDialog::new(peer))
    }

    /// The log no longer held what the device missed: the copy needs [`reload`](Self::reload).
    pub fn is_stale(&self) -> bool {
        self.stale
    }

    pub fn stats(&self) -> MirrorStats {
        self.stats
    }

    /// One dialog, if the device knows it (even one `GetDialogs` leaves out because it has
    /// no message yet).
    pub fn dialog(&self, peer: i64) -> Option<&LocalDialog> {
        self.dialogs.get(&peer)
    }

    /// The main list as `GetDialogs` lists it ([`dialogs_in`](Self::dialogs_in) folder 0).
    pub fn dialogs(&self) -> Vec<Dialog> {
        self.dialogs_in(FOLDER_MAIN)
    }

    /// A folder's dialogs as `GetDialogs` lists them: those with a top message, the pinned
    /// ones first in their order, then newest first (by top message date, then id, then peer).
    pub fn dialogs_in(&self, folder: i32) -> Vec<Dialog> {
        let mut listed: Vec<&LocalDialog> = self
            .dialogs
            .values()
            .filter(|d| d.listed() && d.folder_id == folder)
            .collect();
        listed.sort_by_key(|d| {
            std::cmp::Reverse((
                d.pinned_rank,
                d.top_message_date,
                d.top_message_id,
                d.peer_user_id,
            ))
        });
        listed.into_iter().map(LocalDialog::dialog).collect()
    }

    /// The dialog filters, in the owner's order, as `GetDialogFilters` answers.
    pub fn filters(&self) -> Vec<DialogFilter> {
        let mut filters: Vec<&(i32, DialogFilter)> = self.filters.values().collect();
        filters.sort_by_key(|f| f.0);
        filters.into_iter().map(|f| f.1.clone()).collect()
    }

    /// A dialog's messages the device knows, newest first, as `GetHistory` pages them.
    pub fn history(&self, peer: i64) -> Vec<Message> {
        self.dialogs
            .get(&peer)
            .map(|d| d.messages.values().rev().cloned().collect())
            .unwrap_or_default()
    }

    /// A copy from the server's current dialogs and their whole histories (paged through),
    /// for a new device or after `too_long`; not stale. Take the state to follow from first
    /// (`get_state`, or the one `too_long` jumped to), then load: the pages then hold at least
    /// everything up to it. Updates after it that the pages already showed are applied again,
    /// harmlessly for messages (kept once, counted in [`MirrorStats::duplicates`]) and
    /// watermarks (only forward); an unread count they touch twice is right again after the
    /// dialog's next read.
    pub async fn load(client: &Client) -> Result<Self, Error> {
        let mut mirror = Self::new();
        for folder_id in [FOLDER_MAIN, FOLDER_ARCHIVE] {
            // With the dialogs that have no message yet: a draft or a mute there is the
            // owner's as much as one on a dialog with messages.
            let mut request = GetDialogsRequest {
                limit: RELOAD_PAGE,
                folder_id,
                include_empty: true,
                ..GetDialogsRequest::default()
            };
            // The folder's pinned dialogs come first, in their order.
            let mut pinned = Vec::new();
            loop {
                let page = client.get_dialogs(request).await?.dialogs;
                let Some(last) = page.last() else { break };
                request = GetDialogsRequest {
                    offset_date: last.top_message_date,
                    offset_id: last.top_message_id,
                    offset_peer: last.peer,
                    offset_pinned: last.pinned,
                    limit: RELOAD_PAGE,
                    folder_id,
                    include_empty: true,
                    ..GetDialogsRequest::default()
                };
                let last_page = page.len() < RELOAD_PAGE as usize;
                for dialog in page {
                    if dialog.pinned {
                        pinned.push(dialog.peer_user());
                    }
                    mirror.load_dialog(client, dialog).await?;
                }
                if last_page {
                    break;
                }
            }
            mirror.pinned_order(folder_id, &pinned);
        }
        for (i, filter) in client.get_dialog_filters().await?.into_iter().enumerate() {
            mirror.filters.insert(filter.id, (i as i32 + 1, filter));
        }
        mirror.load_people(client).await?;
        Ok(mirror)
    }

    /// The account's own profile, every privacy rule (defaults included) and its contacts.
    async fn load_people(&mut self, client: &Client) -> Result<(), Error> {
        self.profile = Some(client.get_me().await?);
        for key in [
            privacy_rule::Key::PhoneNumber,
            privacy_rule::Key::LastSeen,
            privacy_rule::Key::ProfilePhoto,
            privacy_rule::Key::FindByPhone,
        ] {
            let rule = client.get_privacy(key as i32).await?;
            self.privacy.insert(rule.key, rule);
        }
        let mut offset_user_id = 0;
        loop {
            let page = client
                .get_contacts(GetContactsRequest {
                    offset_user_id,
                    limit: RELOAD_PAGE,
                    hash: 0,
                })
                .await?
                .users;
            let Some(last) = page.last().map(|u| u.id) else {
                break;
            };
            let last_page = page.len() < RELOAD_PAGE as usize;
            for u in page {
                self.contacts.insert(u.id, (u.first_name, u.last_name));
            }
            if last_page {
                break;
            }
            offset_user_id = last;
        }
        Ok(())
    }

    /// Replaces the copy with the server's current state ([`load`](Self::load)).
    pub async fn reload(&mut self, client: &Client) -> Result<(), Error> {
        *self = Self::load(client).await?;
        Ok(())
    }

    async fn load_dialog(&mut self, client: &Client, dialog: Dialog) -> Result<(), Error> {
        let peer = dialog.peer_user();
        let mut messages = BTreeMap::new();
        let mut offset_id = 0;
        // A dialog without a top message has no history to read.
        let mut more = dialog.top_message_id > 0;
        while more {
            let page = client
                .get_history(GetHistoryRequest {
                    peer: Some(InputPeer::user(peer)),
                    offset_id,
                    limit: RELOAD_PAGE,
                    ..GetHistoryRequest::default()
                })
                .await?
                .messages;
            let Some(oldest) = page.last().map(|m| m.id) else {
                break;
            };
            more = page.len() == RELOAD_PAGE as usize && oldest > 1;
            for m in page {
                self.dialog_of.insert(m.id, peer);
                messages.insert(m.id, m);
            }
            offset_id = oldest;
        }
        self.dialogs.insert(
            peer,
            LocalDialog {
                peer_user_id: peer,
                top_message_id: dialog.top_message_id,
                top_message_date: dialog.top_message_date,
                read_inbox_max_id: dialog.read_inbox_max_id,
                read_outbox_max_id: dialog.read_outbox_max_id,
                delivered_outbox_max_id: dialog.delivered_outbox_max_id,
                unread_count: dialog.unread_count,
                folder_id: dialog.folder_id,
                // Set by the folder's order once it is loaded.
                pinned_rank: 0,
                unread_mark: dialog.unread_mark,
                notify_settings: dialog.notify_settings.unwrap_or_default(),
                draft: dialog.draft,
                settings_bar_hidden: dialog.settings_bar_hidden,
                unread_reactions_count: dialog.unread_reactions_count,
                messages,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use oxigram_proto::types::v1::{
        ReactionCount, Update, UpdateDeleteMessages, UpdateDeliveredOutbox, UpdateEditMessage,
        UpdateNewMessage, UpdateReadHistoryInbox, UpdateReadHistoryOutbox,
        UpdateReadMessageContents, UpdateReadReactions,
    };

    use super::*;

    const ME: i64 = 1;
    const BOB: i64 = 2;
    const CAROL: i64 = 3;

    fn message(id: i64, peer: i64, out: bool, text: &str) -> Message {
        Message {
            id,
            peer_id: Some(Peer::user(peer)),
            from_user_id: if out { ME } else { peer },
            out,
            date: 1000 + id,
            text: text.into(),
            ..Message::default()
        }
    }

    fn wrap(kind: update::Kind) -> PtsUpdate {
        PtsUpdate {
            pts: 1,
            pts_count: 1,
            date: 0,
            update: Some(Update { kind: Some(kind) }),
        }
    }

    fn incoming(id: i64, peer: i64) -> PtsUpdate {
        wrap(update::Kind::NewMessage(UpdateNewMessage {
            message: Some(message(id, peer, false, "hi")),
            random_id: 0,
        }))
    }

    fn outgoing(id: i64, peer: i64) -> PtsUpdate {
        wrap(update::Kind::NewMessage(UpdateNewMessage {
            message: Some(message(id, peer, true, "hello")),
            random_id: id,
        }))
    }

    fn read_inbox(peer: i64, max_id: i64, still_unread_count: i32) -> PtsUpdate {
        wrap(update::Kind::ReadHistoryInbox(UpdateReadHistoryInbox {
            peer: Some(Peer::user(peer)),
            max_id,
            still_unread_count,
        }))
    }

    fn mirror_of(updates: &[PtsUpdate]) -> Mirror {
        let mut mirror = Mirror::new();
        for u in updates {
            mirror.apply(u);
        }
        mirror
    }

    fn unread(mirror: &Mirror, peer: i64) -> Option<i32> {
        mirror.dialog(peer).map(|d| d.unread_count)
    }

    #[test]
    fn unread_counts_incoming_messages_above_the_read_watermark() {
        let cases: Vec<(&str, Vec<PtsUpdate>, i32)> = vec![
            (
                "incoming counts",
                vec![incoming(1, BOB), incoming(2, BOB)],
                2,
            ),
            (
                "our own does not",
                vec![incoming(1, BOB), outgoing(2, BOB)],
                1,
            ),
            (
                "a read sets what it left",
                vec![incoming(1, BOB), incoming(2, BOB), read_inbox(BOB, 1, 1)],
                1,
            ),
            (
                "after a read, only above its watermark",
                vec![
                    incoming(1, BOB),
                    read_inbox(BOB, 1, 0),
                    incoming(2, BOB),
                    outgoing(3, BOB),
                    incoming(4, BOB),
                ],
                2,
            ),
            (
                "a read never moves the watermark back",
                vec![
                    incoming(1, BOB),
                    incoming(2, BOB),
                    read_inbox(BOB, 2, 0),
                    read_inbox(BOB, 1, 0),
                    // The watermark stayed at 2: only 3 is above it.
                    incoming(3, BOB),
                ],
                1,
            ),
            (
                "an edit changes nothing",
                vec![
                    incoming(1, BOB),
                    wrap(update::Kind::EditMessage(UpdateEditMessage {
                        message: Some(message(1, BOB, false, "hi!")),
                    })),
                ],
                1,
            ),
        ];
        for (name, updates, expected) in cases {
            assert_eq!(unread(&mirror_of(&updates), BOB), Some(expected), "{name}");
        }
    }

    #[test]
    fn a_read_of_a_dialog_the_copy_lacks_changes_nothing() {
        let mirror = mirror_of(&[read_inbox(BOB, 5, 0)]);
        assert_eq!(mirror.dialog(BOB), None);
        assert!(mirror.dialogs().is_empty());
    }

    #[test]
    fn dialogs_list_like_get_dialogs() {
        let mirror = mirror_of(&[
            incoming(1, BOB),
            outgoing(2, CAROL),
            incoming(3, BOB),
            // A watermark alone makes a dialog without a message: not listed.
            wrap(update::Kind::DeliveredOutbox(UpdateDeliveredOutbox {
                peer: Some(Peer::user(9)),
                max_id: 4,
            })),
            wrap(update::Kind::ReadHistoryOutbox(UpdateReadHistoryOutbox {
                peer: Some(Peer::user(CAROL)),
                max_id: 2,
            })),
            wrap(update::Kind::DeliveredOutbox(UpdateDeliveredOutbox {
                peer: Some(Peer::user(CAROL)),
                max_id: 2,
            })),
            // Receipts only move forward.
            wrap(update::Kind::ReadHistoryOutbox(UpdateReadHistoryOutbox {
                peer: Some(Peer::user(CAROL)),
                max_id: 1,
            })),
        ]);
        assert_eq!(
            mirror.dialogs(),
            [
                Dialog {
                    peer: Some(Peer::user(BOB)),
                    top_message_id: 3,
                    top_message_date: 1003,
                    unread_count: 2,
                    ..Dialog::default()
                },
                Dialog {
                    peer: Some(Peer::user(CAROL)),
                    top_message_id: 2,
                    top_message_date: 1002,
                    read_outbox_max_id: 2,
                    delivered_outbox_max_id: 2,
                    ..Dialog::default()
                },
            ]
        );
        assert_eq!(mirror.dialog(9).map(|d| d.delivered_outbox_max_id), Some(4));
        let ids: Vec<i64> = mirror.history(BOB).iter().map(|m| m.id).collect();
        assert_eq!(ids, [3, 1], "newest first");
    }

    #[test]
    fn an_edit_replaces_the_message_and_keeps_the_top() {
        let edited = Message {
            edit_date: 2000,
            ..message(1, BOB, true, "hello, edited")
        };
        let mirror = mirror_of(&[
            outgoing(1, BOB),
            incoming(2, BOB),
            wrap(update::Kind::EditMessage(UpdateEditMessage {
                message: Some(edited.clone()),
            })),
            // An edit of a message from before the copy began: skipped.
            wrap(update::Kind::EditMessage(UpdateEditMessage {
                message: Some(message(7, CAROL, true, "old")),
            })),
        ]);
        assert_eq!(mirror.history(BOB)[1], edited);
        let d = mirror
            .dialog(BOB)
            .map(|d| (d.top_message_id, d.top_message_date));
        assert_eq!(d, Some((2, 1002)));
        assert_eq!(mirror.dialog(CAROL), None);
        assert_eq!(mirror.stats().unknown_edits, 1);
    }

    #[test]
    fn played_notes_are_unplayed_no_more() {
        let note = |id: i64, peer: i64| {
            wrap(update::Kind::NewMessage(UpdateNewMessage {
                message: Some(Message {
                    media_unread: true,
                    ..message(id, peer, false, "")
                }),
                random_id: 0,
            }))
        };
        let mut mirror = mirror_of(&[note(1, BOB), note(2, BOB), note(3, CAROL)]);
        mirror.apply(&wrap(update::Kind::ReadMessageContents(
            UpdateReadMessageContents {
                messages: vec![3, 1, 99],
                date: 5,
            },
        )));
        let unplayed: Vec<(i64, bool)> = [BOB, CAROL]
            .iter()
            .flat_map(|peer| mirror.history(*peer))
            .map(|m| (m.id, m.media_unread))
            .collect();
        assert_eq!(
            unplayed.iter().filter(|(_, unread)| *unread).count(),
            1,
            "only 2 stays unplayed: {unplayed:?}"
        );
        assert!(unplayed.contains(&(2, true)));
    }

    #[test]
    fn reactions_show_on_held_messages_and_count_until_read() {
        let sent = |id: i64| {
            wrap(update::Kind::NewMessage(UpdateNewMessage {
                message: Some(message(id, BOB, true, "mine")),
                random_id: 0,
            }))
        };
        let reacted = |id: i64, reaction: &str, unread: bool| {
            let reactions = match reaction {
                "" => vec![],
                r => vec![ReactionCount {
                    reaction: r.into(),
                    count: 1,
                    chosen_by_me: false,
                }],
            };
            wrap(update::Kind::MessageReactions(UpdateMessageReactions {
                peer: Some(Peer::user(BOB)),
                msg_id: id,
                reactions,
                reaction_unread: unread,
            }))
        };
        let count = |m: &Mirror| m.dialog(BOB).map(|d| d.unread_reactions_count);
        let mut mirror = mirror_of(&[sent(1), sent(2), sent(3)]);
        // (update, the dialog's unread reactions after it)
        let steps = [
            (reacted(1, "👍", true), 1),
            (reacted(1, "❤", true), 1),
            (reacted(2, "🔥", true), 2),
            (reacted(2, "", false), 1),
            // A message the copy does not hold moves nothing.
            (reacted(99, "👍", true), 1),
            (reacted(3, "😂", true), 2),
        ];
        for (i, (update, want)) in steps.iter().enumerate() {
            mirror.apply(update);
            assert_eq!(count(&mirror), Some(*want), "step {i}");
        }
        let held = |m: &Mirror, id: i64| {
            m.history(BOB).into_iter().find(|h| h.id == id).map(|h| {
                (
                    h.reactions
                        .iter()
                        .map(|r| r.reaction.clone())
                        .collect::<Vec<_>>(),
                    h.reaction_unread,
                )
            })
        };
        assert_eq!(held(&mirror, 1), Some((vec!["❤".to_owned()], true)));
        assert_eq!(held(&mirror, 2), Some((vec![], false)));
        mirror.apply(&wrap(update::Kind::ReadReactions(UpdateReadReactions {
            peer: Some(Peer::user(BOB)),
            messages: vec![1, 3],
        })));
        assert_eq!(count(&mirror), Some(0));
        assert_eq!(held(&mirror, 1), Some((vec!["❤".to_owned()], false)));
        assert_eq!(held(&mirror, 3).map(|h| h.1), Some(false));
    }

    #[test]
    fn a_message_named_twice_is_held_once() {
        let mirror = mirror_of(&[incoming(1, BOB), incoming(1, BOB)]);
        assert_eq!(mirror.history(BOB).len(), 1);
        assert_eq!(unread(&mirror, BOB), Some(1));
        assert_eq!(mirror.stats().duplicates, 1);
    }

    #[test]
    fn a_deletion_uncounts_unread_and_moves_the_top() {
        let mut mirror = mirror_of(&[
            incoming(1, BOB),
            read_inbox(BOB, 1, 0),
            incoming(2, BOB),
            outgoing(3, CAROL),
            incoming(4, BOB),
        ]);
        mirror.delete_messages(&[4, 1, 3, 99]);
        let bob = mirror
            .dialog(BOB)
            .map(|d| (d.top_message_id, d.unread_count));
        assert_eq!(bob, Some((2, 1)), "4 was unread and the top; 1 was read");
        // Carol's dialog has nothing left: GetDialogs leaves it out.
        let listed: Vec<i64> = mirror.dialogs().iter().map(Dialog::peer_user).collect();
        assert_eq!(listed, [BOB]);
        assert_eq!(mirror.stats().unknown_deletes, 1);
    }

    #[test]
    fn a_message_logged_after_its_deletion_never_shows() {
        let mut mirror = mirror_of(&[incoming(1, BOB)]);
        mirror.apply(&wrap(update::Kind::DeleteMessages(UpdateDeleteMessages {
            ids: vec![2],
        })));
        mirror.apply(&incoming(2, BOB));
        let ids: Vec<i64> = mirror.history(BOB).iter().map(|m| m.id).collect();
        assert_eq!(ids, [1]);
        assert_eq!(unread(&mirror, BOB), Some(1));
        let stats = mirror.stats();
        assert_eq!((stats.unknown_deletes, stats.arrived_deleted), (1, 1));
    }

    fn at(pts: i32, kind: update::Kind) -> PtsUpdate {
        PtsUpdate { pts, ..wrap(kind) }
    }

    fn pin(peer: i64, pinned: bool) -> PtsUpdate {
        wrap(update::Kind::DialogPinned(
            oxigram_proto::types::v1::UpdateDialogPinned {
                peer: Some(Peer::user(peer)),
                pinned,
            },
        ))
    }

    fn listed(mirror: &Mirror, folder: i32) -> Vec<(i64, bool)> {
        mirror
            .dialogs_in(folder)
            .iter()
            .map(|d| (d.peer_user(), d.pinned))
            .collect()
    }

    #[test]
    fn settings_apply_by_the_rules_the_server_keeps() {
        use oxigram_proto::types::v1::{
            FolderPeer, UpdateDialogUnreadMark, UpdateFolderPeers, UpdatePinnedDialogs,
        };
        let mut mirror = mirror_of(&[
            incoming(1, BOB),
            incoming(2, CAROL),
            incoming(3, 9),
            pin(BOB, true),
            pin(CAROL, true),
            // Pinned already: stays where it is.
            pin(BOB, true),
        ]);
        assert_eq!(listed(&mirror, 0), [(CAROL, true), (BOB, true), (9, false)]);
        mirror.apply(&wrap(update::Kind::PinnedDialogs(UpdatePinnedDialogs {
            folder_id: 0,
            order: vec![Peer::user(9), Peer::user(BOB)],
        })));
        assert_eq!(listed(&mirror, 0), [(9, true), (BOB, true), (CAROL, false)]);
        mirror.apply(&wrap(update::Kind::FolderPeers(UpdateFolderPeers {
            folder_peers: vec![FolderPeer {
                peer: Some(Peer::user(9)),
                folder_id: 1,
            }],
        })));
        assert_eq!(listed(&mirror, 1), [(9, false)], "archived, unpinned");
        assert_eq!(listed(&mirror, 0), [(BOB, true), (CAROL, false)]);
        mirror.apply(&wrap(update::Kind::DialogUnreadMark(
            UpdateDialogUnreadMark {
                peer: Some(Peer::user(CAROL)),
                unread: true,
            },
        )));
        assert!(mirror.dialog(CAROL).is_some_and(|d| d.unread_mark));
        mirror.apply(&read_inbox(CAROL, 2, 0));
        assert!(
            mirror.dialog(CAROL).is_some_and(|d| !d.unread_mark),
            "a read takes it away"
        );
    }

    #[test]
    fn a_folder_pins_at_most_its_limit() {
        let n = MAX_PINNED_DIALOGS as i64 + 1;
        let mut updates: Vec<PtsUpdate> = (1..=n).map(|i| incoming(i, 100 + i)).collect();
        updates.extend((1..=n).map(|i| pin(100 + i, true)));
        let mirror = mirror_of(&updates);
        let pinned: Vec<i64> = listed(&mirror, 0)
            .into_iter()
            .filter(|(_, pinned)| *pinned)
            .map(|(peer, _)| peer)
            .collect();
        assert_eq!(pinned.len(), MAX_PINNED_DIALOGS);
        assert!(!pinned.contains(&(100 + n)));
    }

    #[test]
    fn a_draft_cleared_by_a_send_is_only_the_one_it_names() {
        use oxigram_proto::types::v1::UpdateDraftMessage;
        let save = |pts: i32, text: &str| {
            at(
                pts,
                update::Kind::DraftMessage(UpdateDraftMessage {
                    peer: Some(Peer::user(BOB)),
                    draft: Some(DraftMessage {
                        text: text.into(),
                        ..DraftMessage::default()
                    }),
                    clears_pts: 0,
                }),
            )
        };
        let clear = |pts: i32, clears_pts: i32| {
            at(
                pts,
                update::Kind::DraftMessage(UpdateDraftMessage {
                    peer: Some(Peer::user(BOB)),
                    draft: None,
                    clears_pts,
                }),
            )
        };
        let draft = |m: &Mirror| {
            m.dialog(BOB)
                .and_then(|d| d.draft.clone())
                .map(|d| (d.text, d.pts))
        };
        let mut mirror = mirror_of(&[incoming(1, BOB), save(2, "first")]);
        assert_eq!(draft(&mirror), Some(("first".into(), 2)));
        // Saved again after the send that clears the first: it stays.
        mirror.apply(&save(4, "second"));
        mirror.apply(&clear(5, 2));
        assert_eq!(draft(&mirror), Some(("second".into(), 4)));
        mirror.apply(&clear(6, 4));
        assert_eq!(draft(&mirror), None);
        // Saved empty (no clears_pts): gone whatever it was.
        mirror.apply(&save(7, "third"));
        mirror.apply(&clear(8, 0));
        assert_eq!(draft(&mirror), None);
    }

    #[test]
    fn filters_keep_their_place_and_take_an_order() {
        use oxigram_proto::types::v1::{UpdateDialogFilter, UpdateDialogFilterOrder};
        let filter = |id: i32, title: &str| {
            wrap(update::Kind::DialogFilter(UpdateDialogFilter {
                id,
                filter: Some(DialogFilter {
                    id,
                    title: title.into(),
                    ..DialogFilter::default()
                }),
            }))
        };
        let mut mirror = mirror_of(&[
            filter(2, "a"),
            filter(3, "b"),
            filter(4, "c"),
            filter(2, "a2"),
        ]);
        mirror.apply(&wrap(update::Kind::DialogFilterOrder(
            UpdateDialogFilterOrder { order: vec![4, 2] },
        )));
        let titles =
            |m: &Mirror| -> Vec<String> { m.filters().into_iter().map(|f| f.title).collect() };
        assert_eq!(titles(&mirror), ["c", "a2", "b"]);
        mirror.apply(&wrap(update::Kind::DialogFilter(UpdateDialogFilter {
            id: 4,
            filter: None,
        })));
        mirror.apply(&filter(5, "d"));
        assert_eq!(titles(&mirror), ["a2", "b", "d"]);
    }

    #[test]
    fn a_too_long_stream_marks_the_copy_stale() {
        let mut mirror = Mirror::new();
        mirror.follow(&Event::Resumed { pts: 3 });
        assert!(!mirror.is_stale());
        mirror.follow(&Event::TooLong { pts: 40 });
        assert!(mirror.is_stale());
    }
}
