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
