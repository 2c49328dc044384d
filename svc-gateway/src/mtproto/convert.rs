//! Translation between oxigram's API types and Telegram's TL types, and of errors: a gRPC
//! status becomes `rpc_error` with Telegram's code and the stable error name.

use oxigram_mtproto::session::RpcError;
use oxigram_proto::types::v1 as ox;
use oxigram_tl::{enums, types};
use tonic::{Code, Status};

/// A gRPC status as Telegram's `rpc_error`: the stable code (`PEER_ID_INVALID`,
/// `FLOOD_WAIT_30`, …) and the number Telegram uses for its class.
pub fn rpc_error(status: &Status) -> RpcError {
    let name = oxigram_errors::code_of(status).unwrap_or_else(|| match status.code() {
        Code::Unauthenticated => "AUTH_KEY_UNREGISTERED".into(),
        Code::Unavailable | Code::DeadlineExceeded => "RPC_CALL_FAIL".into(),
        _ => "INTERNAL".into(),
    });
    let number = if name.starts_with("FLOOD_WAIT_") {
        420
    } else {
        match status.code() {
            Code::InvalidArgument
            | Code::NotFound
            | Code::AlreadyExists
            | Code::FailedPrecondition
            | Code::OutOfRange => 400,
            Code::Unauthenticated => 401,
            Code::PermissionDenied => 403,
            Code::ResourceExhausted => 420,
            _ => 500,
        }
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
        // oxigram needs no access hashes: a peer is checked by the viewer's rights on every call.
        access_hash: Some(0),
        first_name: text(&user.first_name),
        last_name: text(&user.last_name),
        username: text(&user.username),
        phone: text(&user.phone),
        photo: None,
        status: None,
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

/// The `config` clients ask for first: one DC (this door), Telegram's usual limits.
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
            ipv6: false,
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

fn peer(peer: Option<&ox::Peer>) -> enums::Peer {
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

/// A message of a private chat as its owner sees it (text only; media is not mapped yet).
pub fn message(message: &ox::Message) -> enums::Message {
    enums::Message::Message(types::Message {
        out: message.out,
        mentioned: false,
        media_unread: false,
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
        fwd_from: None,
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
        media: None,
        reply_markup: None,
        entities: None,
        views: None,
        forwards: None,
        replies: None,
        edit_date: (message.edit_date != 0).then(|| int(message.edit_date)),
        post_author: None,
        grouped_id: None,
        reactions: None,
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
