//! Translation between oxigram's API types and Telegram's TL types, and of errors: a gRPC
//! status becomes `rpc_error` with Telegram's code and the stable error name.

use oxigram_mtproto::session::RpcError;
use oxigram_proto::types::v1 as ox;
use oxigram_tl::{enums, types};
use tonic::{Code, Status};

/// oxigram error codes whose Telegram class differs from what their gRPC code says, and the
/// few whose Telegram name differs: (oxigram code, Telegram number, Telegram name). Every other
/// code keeps its name, and its number follows its gRPC code (see [`rpc_error`]).
const TELEGRAM_ERRORS: &[(&str, i32, &str)] = &[
    // Forbidden in oxigram's terms, a plain bad request in Telegram's.
    ("USER_IS_BLOCKED", 400, "USER_IS_BLOCKED"),
    ("CHAT_FORWARDS_RESTRICTED", 400, "CHAT_FORWARDS_RESTRICTED"),
    // A banned account: Telegram's clients take a 401 as signed out.
    ("USER_DEACTIVATED_BAN", 401, "USER_DEACTIVATED_BAN"),
    // Retry-later failures: Telegram's 500 names, which clients retry by themselves.
    ("SERVICE_UNAVAILABLE", 500, "RPC_CALL_FAIL"),
    ("INTERNAL", 500, "INTERNAL_SERVER_ERROR"),
];

/// A gRPC status as Telegram's `rpc_error`: the stable code (`PEER_ID_INVALID`,
/// `FLOOD_WAIT_30`, …) with the number Telegram uses for its class. The one table of
/// differences is [`TELEGRAM_ERRORS`].
pub fn rpc_error(status: &Status) -> RpcError {
    let name = oxigram_errors::code_of(status).unwrap_or_else(|| match status.code() {
        Code::Unauthenticated => "AUTH_KEY_UNREGISTERED".into(),
        Code::Unavailable | Code::DeadlineExceeded => "SERVICE_UNAVAILABLE".into(),
        _ => "INTERNAL".into(),
    });
    if let Some((_, number, telegram)) = TELEGRAM_ERRORS.iter().find(|(ox, _, _)| *ox == name) {
        return RpcError::new(*number, *telegram);
    }
    // Telegram's clients read the part from the name and upload it again; an upload with
    // every part of its count saved and more besides has a wrong count instead.
    if name == "FILE_PART_MISSING" {
        return match oxigram_errors::missing_part(status) {
            Some(part) => RpcError::new(400, format!("FILE_PART_{part}_MISSING")),
            None => RpcError::new(400, "FILE_PARTS_INVALID"),
        };
    }
    if name.starts_with("FLOOD_WAIT_") {
        return RpcError::new(420, name);
    }
    let number = match status.code() {
        Code::InvalidArgument
        | Code::NotFound
        | Code::AlreadyExists
        | Code::FailedPrecondition
        | Code::OutOfRange => 400,
        Code::Unauthenticated => 401,
        Code::PermissionDenied => 403,
        Code::ResourceExhausted => 420,
        _ => 500,
    };
    RpcError::new(number, name)
}

/// A user as the viewer sees her; `is_self` marks the viewer's own account.
pub fn user(user: &ox::User, is_self: bool) -> enums::User {
    let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    enums::User::User(types::User {
        is_self,
        contact: user.contact,
        mutual_contact: user.mutual_contact,
        deleted: false,
        bot: false,
        bot_chat_history: false,
        bot_nochats: false,
        verified: false,
        restricted: false,
        min: false,
        bot_inline_geo: false,
        support: false,
        scam: false,
        apply_min_photo: false,
        fake: false,
        bot_attach_menu: false,
        premium: false,
        attach_menu_enabled: false,
        bot_can_edit: false,
        close_friend: false,
        stories_hidden: false,
        stories_unavailable: false,
        contact_require_premium: false,
        bot_business: false,
        bot_has_main_app: false,
        bot_forum_view: false,
        bot_forum_can_manage_topics: false,
        bot_can_manage_bots: false,
        bot_guestchat: false,
        bot_guard: false,
        id: user.id,
        // oxigram needs no access hashes: a peer is checked by the viewer's rights on every call,
        // and whatever a client hands back is ignored. It is not 0, though: stock clients keep
        // only users with a nonzero hash in their entity cache, where Telethon looks up "me".
        access_hash: Some(user.id),
        first_name: text(&user.first_name),
        last_name: text(&user.last_name),
        username: text(&user.username),
        phone: text(&user.phone),
        photo: None,
        status: user.status.as_ref().and_then(user_status),
        bot_info_version: None,
        restriction_reason: None,
        bot_inline_placeholder: None,
        lang_code: None,
        emoji_status: None,
        usernames: None,
        stories_max_id: None,
        color: None,
        profile_color: None,
        bot_active_users: None,
        bot_verification_icon: None,
        send_paid_messages_stars: None,
        linked_community_id: None,
    })
}

/// The `config` clients ask for first: one DC (this door, at `host`, marked IPv6 when it is an
/// IPv6 address, as clients pick an option by it), Telegram's usual limits.
pub fn config(now: i32, host: &str, port: i32) -> enums::Config {
    enums::Config::Config(types::Config {
        default_p2p_contacts: false,
        preload_featured_stickers: false,
        revoke_pm_inbox: true,
        blocked_mode: false,
        force_try_ipv6: false,
        date: now,
        expires: now + 3600,
        test_mode: false,
        this_dc: 1,
        dc_options: vec![enums::DcOption::Option(types::DcOption {
            ipv6: host.parse::<std::net::Ipv6Addr>().is_ok(),
            media_only: false,
            tcpo_only: false,
            cdn: false,
            r#static: false,
            this_port_only: false,
            id: 1,
            ip_address: host.to_owned(),
            port,
            secret: None,
        })],
        dc_txt_domain_name: String::new(),
        chat_size_max: 200,
        megagroup_size_max: 200_000,
        forwarded_count_max: 100,
        online_update_period_ms: 210_000,
        offline_blur_timeout_ms: 5_000,
        offline_idle_timeout_ms: 30_000,
        online_cloud_timeout_ms: 300_000,
        notify_cloud_delay_ms: 30_000,
        notify_default_delay_ms: 1_500,
        push_chat_period_ms: 60_000,
        push_chat_limit: 2,
        edit_time_limit: 172_800,
        revoke_time_limit: i32::MAX,
        revoke_pm_time_limit: i32::MAX,
        rating_e_decay: 2_419_200,
        stickers_recent_limit: 200,
        channels_read_media_period: 604_800,
        tmp_sessions: None,
        call_receive_timeout_ms: 20_000,
        call_ring_timeout_ms: 90_000,
        call_connect_timeout_ms: 30_000,
        call_packet_timeout_ms: 10_000,
        me_url_prefix: String::new(),
        autoupdate_url_prefix: None,
        gif_search_username: None,
        venue_search_username: None,
        img_search_username: None,
        static_maps_provider: None,
        caption_length_max: 1024,
        message_length_max: 4096,
        webfile_dc_id: 1,
        suggested_lang_code: None,
        lang_pack_version: None,
        base_lang_pack_version: None,
        reactions_default: None,
        autologin_token: None,
    })
}

/// A TL input peer as oxigram's (private chats only; anything else is `PEER_ID_INVALID`).
pub fn input_peer(peer: &enums::InputPeer) -> Result<ox::InputPeer, RpcError> {
    use ox::input_peer::Kind;
    let kind = match peer {
        enums::InputPeer::PeerSelf => Kind::Self_(ox::InputPeerSelf {}),
        enums::InputPeer::User(user) => Kind::User(ox::InputPeerUser {
            user_id: user.user_id,
        }),
        _ => return Err(RpcError::new(400, "PEER_ID_INVALID")),
    };
    Ok(ox::InputPeer { kind: Some(kind) })
}

/// The peer an answer names.
pub fn peer(peer: Option<&ox::Peer>) -> enums::Peer {
    let user_id = match peer.and_then(|p| p.kind.as_ref()) {
        Some(ox::peer::Kind::UserId(id)) => *id,
        None => 0,
    };
    enums::Peer::User(types::PeerUser { user_id })
}

/// Telegram's message ids and dates are 32-bit.
pub fn int(value: i64) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

/// A message of a private chat as its owner sees it, its file as Telegram's media (`media`).
pub fn message(message: &ox::Message) -> enums::Message {
    enums::Message::Message(types::Message {
        out: message.out,
        mentioned: false,
        media_unread: message.media_unread,
        silent: message.silent,
        post: false,
        from_scheduled: false,
        legacy: false,
        edit_hide: false,
        pinned: false,
        noforwards: message.noforwards,
        invert_media: false,
        offline: false,
        video_processing_pending: false,
        paid_suggested_post_stars: false,
        paid_suggested_post_ton: false,
        id: int(message.id),
        from_id: Some(enums::Peer::User(types::PeerUser {
            user_id: message.from_user_id,
        })),
        from_boosts_applied: None,
        from_rank: None,
        peer_id: peer(message.peer_id.as_ref()),
        saved_peer_id: None,
        fwd_from: message.fwd_from.as_ref().map(fwd_header),
        via_bot_id: None,
        via_business_bot_id: None,
        guestchat_via_from: None,
        reply_to: (message.reply_to_msg_id != 0).then(|| {
            enums::MessageReplyHeader::Header(types::MessageReplyHeader {
                reply_to_scheduled: false,
                reply_to_ephemeral: false,
                forum_topic: false,
                quote: false,
                reply_to_msg_id: Some(int(message.reply_to_msg_id)),
                reply_to_peer_id: None,
                reply_from: None,
                reply_media: None,
                reply_to_top_id: None,
                quote_text: None,
                quote_entities: None,
                quote_offset: None,
                todo_item_id: None,
                poll_option: None,
            })
        }),
        date: int(message.date),
        message: message.text.clone(),
        media: super::media::to_tl(message),
        reply_markup: None,
        entities: super::entities::to_tl(&message.entities),
        views: None,
        forwards: None,
        replies: None,
        edit_date: (message.edit_date != 0).then(|| int(message.edit_date)),
        post_author: None,
        grouped_id: (message.grouped_id != 0).then_some(message.grouped_id),
        reactions: (!message.reactions.is_empty()).then(|| reactions(&message.reactions)),
        restriction_reason: None,
        ttl_period: None,
        quick_reply_shortcut_id: None,
        effect: None,
        factcheck: None,
        report_delivery_until_date: None,
        paid_message_stars: None,
        suggested_post: None,
        schedule_repeat_period: None,
        summary_from_language: None,
        rich_message: None,
    })
}

/// A user's presence as far as the viewer may see it.
pub fn user_status(status: &ox::UserStatus) -> Option<enums::UserStatus> {
    use ox::user_status::Kind;
    Some(match status.kind.as_ref()? {
        Kind::Online(o) => enums::UserStatus::Online(types::UserStatusOnline {
            expires: int(o.expires),
        }),
        Kind::Offline(o) => enums::UserStatus::Offline(types::UserStatusOffline {
            was_online: int(o.was_online),
        }),
        Kind::Recently(_) => {
            enums::UserStatus::Recently(types::UserStatusRecently { by_me: false })
        }
        Kind::LastWeek(_) => {
            enums::UserStatus::LastWeek(types::UserStatusLastWeek { by_me: false })
        }
        Kind::LastMonth(_) => {
            enums::UserStatus::LastMonth(types::UserStatusLastMonth { by_me: false })
        }
    })
}

/// Where a forward came from.
fn fwd_header(fwd: &ox::MessageFwdHeader) -> enums::MessageFwdHeader {
    let saved_from = fwd.saved_from_peer.as_ref();
    enums::MessageFwdHeader::Header(types::MessageFwdHeader {
        imported: false,
        saved_out: false,
        from_id: (fwd.from_user_id != 0).then_some(enums::Peer::User(types::PeerUser {
            user_id: fwd.from_user_id,
        })),
        from_name: None,
        date: int(fwd.date),
        channel_post: None,
        post_author: None,
        saved_from_peer: saved_from.map(|p| peer(Some(p))),
        saved_from_msg_id: saved_from.map(|_| int(fwd.saved_from_msg_id)),
        saved_from_id: None,
        saved_from_name: None,
        saved_date: None,
        psa_type: None,
    })
}

/// A message id that names nothing (any more) for its owner.
pub fn message_empty(id: i32) -> enums::Message {
    enums::Message::Empty(types::MessageEmpty { id, peer_id: None })
}

/// How a dialog notifies its owner.
pub fn notify_settings(settings: Option<&ox::PeerNotifySettings>) -> enums::PeerNotifySettings {
    let settings = settings.cloned().unwrap_or_default();
    enums::PeerNotifySettings::Settings(types::PeerNotifySettings {
        show_previews: settings.show_previews,
        silent: settings.silent,
        mute_until: (settings.mute_until != 0).then(|| int(settings.mute_until)),
        ios_sound: None,
        android_sound: None,
        other_sound: None,
        stories_muted: None,
        stories_hide_sender: None,
        stories_ios_sound: None,
        stories_android_sound: None,
        stories_other_sound: None,
    })
}

/// A message's reactions as Telegram lists them: each emoji's count, the owner's own marked
/// chosen (first and only: one reaction per user).
pub fn reactions(reactions: &[ox::ReactionCount]) -> enums::MessageReactions {
    enums::MessageReactions::Reactions(types::MessageReactions {
        min: false,
        can_see_list: false,
        reactions_as_tags: false,
        results: reactions
            .iter()
            .map(|r| {
                enums::ReactionCount::Count(types::ReactionCount {
                    chosen_order: r.chosen_by_me.then_some(0),
                    reaction: enums::Reaction::Emoji(types::ReactionEmoji {
                        emoticon: r.reaction.clone(),
                    }),
                    count: r.count,
                })
            })
            .collect(),
        recent_reactions: None,
        top_reactors: None,
    })
}

/// A dialog of the owner's list.
pub fn dialog(dialog: &ox::Dialog) -> enums::Dialog {
    enums::Dialog::Dialog(types::Dialog {
        pinned: dialog.pinned,
        unread_mark: dialog.unread_mark,
        view_forum_as_messages: false,
        peer: peer(dialog.peer.as_ref()),
        top_message: int(dialog.top_message_id),
        read_inbox_max_id: int(dialog.read_inbox_max_id),
        read_outbox_max_id: int(dialog.read_outbox_max_id),
        unread_count: dialog.unread_count,
        unread_mentions_count: 0,
        unread_reactions_count: dialog.unread_reactions_count,
        unread_poll_votes_count: 0,
        notify_settings: notify_settings(dialog.notify_settings.as_ref()),
        pts: None,
        draft: None,
        folder_id: (dialog.folder_id != 0).then_some(dialog.folder_id),
        ttl_period: None,
    })
}

/// The profile page of a user: her bio and the bars a client shows.
pub fn user_full(user: &ox::User, blocked: bool) -> enums::UserFull {
    enums::UserFull::Full(types::UserFull {
        blocked,
        phone_calls_available: false,
        phone_calls_private: false,
        can_pin_message: false,
        has_scheduled: false,
        video_calls_available: false,
        voice_messages_forbidden: false,
        translations_disabled: false,
        stories_pinned_available: false,
        blocked_my_stories_from: false,
        wallpaper_overridden: false,
        contact_require_premium: false,
        read_dates_private: false,
        sponsored_enabled: false,
        can_view_revenue: false,
        bot_can_manage_emoji_status: false,
        display_gifts_button: false,
        noforwards_my_enabled: false,
        noforwards_peer_enabled: false,
        unofficial_security_risk: false,
        id: user.id,
        about: (!user.about.is_empty()).then(|| user.about.clone()),
        settings: enums::PeerSettings::Settings(types::PeerSettings {
            report_spam: false,
            add_contact: false,
            block_contact: false,
            share_contact: false,
            need_contacts_exception: false,
            report_geo: false,
            autoarchived: false,
            invite_members: false,
            request_chat_broadcast: false,
            business_bot_paused: false,
            business_bot_can_reply: false,
            geo_distance: None,
            request_chat_title: None,
            request_chat_date: None,
            business_bot_id: None,
            business_bot_manage_url: None,
            charge_paid_message_stars: None,
            registration_month: None,
            phone_country: None,
            name_change_date: None,
            photo_change_date: None,
        }),
        personal_photo: None,
        profile_photo: None,
        fallback_photo: None,
        notify_settings: notify_settings(None),
        bot_info: None,
        pinned_msg_id: None,
        common_chats_count: 0,
        folder_id: None,
        ttl_period: None,
        theme: None,
        private_forward_name: None,
        bot_group_admin_rights: None,
        bot_broadcast_admin_rights: None,
        wallpaper: None,
        stories: None,
        business_work_hours: None,
        business_location: None,
        business_greeting_message: None,
        business_away_message: None,
        business_intro: None,
        birthday: None,
        personal_channel_id: None,
        personal_channel_message: None,
        stargifts_count: None,
        starref_program: None,
        bot_verification: None,
        send_paid_messages_stars: None,
        disallowed_gifts: None,
        stars_rating: None,
        stars_my_pending_rating: None,
        stars_my_pending_rating_date: None,
        main_tab: None,
        saved_music: None,
        note: None,
        bot_manager_id: None,
    })
}

/// Users of an answer, the viewer's own account marked as such.
pub fn users(users: &[ox::User], viewer: i64) -> Vec<enums::User> {
    users.iter().map(|u| user(u, u.id == viewer)).collect()
}

/// One device of the account, named by its auth key id (Telegram's `hash` of an authorization).
pub fn authorization(device: &oxigram_proto::api::v1::AuthorizationInfo) -> enums::Authorization {
    enums::Authorization::Authorization(types::Authorization {
        current: device.current,
        official_app: false,
        password_pending: false,
        encrypted_requests_disabled: false,
        call_requests_disabled: false,
        unconfirmed: false,
        hash: device.auth_key_id,
        device_model: device.device_model.clone(),
        platform: String::new(),
        system_version: String::new(),
        api_id: 0,
        app_name: String::new(),
        app_version: String::new(),
        date_created: int(device.date_created),
        date_active: int(device.date_bound.max(device.date_created)),
        ip: String::new(),
        country: String::new(),
        region: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxigram_errors::{Error, ErrorCode};

    #[test]
    fn oxigram_errors_take_telegram_numbers_and_names() {
        let cases: [(Status, i32, &str); 14] = [
            (
                oxigram_errors::file_part_missing(Some(3)),
                400,
                "FILE_PART_3_MISSING",
            ),
            (
                oxigram_errors::file_part_missing(Some(0)),
                400,
                "FILE_PART_0_MISSING",
            ),
            (
                oxigram_errors::file_part_missing(None),
                400,
                "FILE_PARTS_INVALID",
            ),
            (
                Error::new(ErrorCode::PeerIdInvalid, "x").into(),
                400,
                "PEER_ID_INVALID",
            ),
            (
                Error::new(ErrorCode::MessageIdInvalid, "x").into(),
                400,
                "MESSAGE_ID_INVALID",
            ),
            (
                Error::new(ErrorCode::AuthKeyUnregistered, "x").into(),
                401,
                "AUTH_KEY_UNREGISTERED",
            ),
            (
                Error::new(ErrorCode::FloodWait(30), "x").into(),
                420,
                "FLOOD_WAIT_30",
            ),
            (
                Error::new(ErrorCode::MessageAuthorRequired, "x").into(),
                403,
                "MESSAGE_AUTHOR_REQUIRED",
            ),
            (
                Error::new(ErrorCode::UserIsBlocked, "x").into(),
                400,
                "USER_IS_BLOCKED",
            ),
            (
                Error::new(ErrorCode::UserDeactivatedBan, "x").into(),
                401,
                "USER_DEACTIVATED_BAN",
            ),
            (
                Error::new(ErrorCode::PhoneNumberOccupied, "x").into(),
                400,
                "PHONE_NUMBER_OCCUPIED",
            ),
            (
                Error::new(ErrorCode::Unavailable, "x").into(),
                500,
                "RPC_CALL_FAIL",
            ),
            (
                Status::unauthenticated("no code"),
                401,
                "AUTH_KEY_UNREGISTERED",
            ),
            (Status::internal("no code"), 500, "INTERNAL_SERVER_ERROR"),
        ];
        for (status, number, name) in cases {
            let error = rpc_error(&status);
            assert_eq!(
                (error.code, error.message.as_str()),
                (number, name),
                "{status:?}"
            );
        }
    }

    #[test]
    fn the_dc_option_is_marked_ipv6_only_for_an_ipv6_address() {
        // host → (ip_address, ipv6) of the one DC option.
        let cases = [
            ("203.0.113.10", false),
            ("2001:db8::7", true),
            ("::1", true),
            ("chat.example.org", false),
        ];
        for (host, ipv6) in cases {
            let enums::Config::Config(config) = config(0, host, 443);
            let options: Vec<(String, i32, bool)> = config
                .dc_options
                .iter()
                .map(|o| match o {
                    enums::DcOption::Option(o) => (o.ip_address.clone(), o.port, o.ipv6),
                })
                .collect();
            assert_eq!(options, vec![(host.to_owned(), 443, ipv6)], "{host}");
        }
    }
}
