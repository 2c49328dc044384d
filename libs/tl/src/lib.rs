//! Telegram's TL types: the API layer clients speak (`tl/api.tl`) and the MTProto service
//! schema (`tl/mtproto.tl`), generated at build time by `grammers-tl-gen`. The runtime traits
//! and primitive (de)serialisers are `grammers-tl-types`' own, re-exported here because the
//! generated code names them from this crate's root.

pub use grammers_tl_types::{
    Blob, Cursor, Deserializable, Identifiable, RawVec, RemoteCall, Serializable, deserialize,
    serialize,
};

#[allow(
    clippy::all,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    non_camel_case_types,
    unused
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/generated_common.rs"));
    /// Bare constructors.
    pub mod types {
        include!(concat!(env!("OUT_DIR"), "/generated_types.rs"));
    }
    /// Functions (requests) and their return types.
    pub mod functions {
        include!(concat!(env!("OUT_DIR"), "/generated_functions.rs"));
    }
    /// Boxed types: one enum per TL type, read by constructor id.
    pub mod enums {
        include!(concat!(env!("OUT_DIR"), "/generated_enums.rs"));
    }
}

pub use generated::{LAYER, enums, functions, name_for_id, types};

/// The constructor id a serialised TL object starts with, if it has four bytes.
pub fn constructor_id(body: &[u8]) -> Option<u32> {
    let head: [u8; 4] = body.get(..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(head))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layer_is_the_schema_layer() {
        assert_eq!(LAYER, 229);
    }

    #[test]
    fn a_request_survives_a_round_trip() {
        let request = functions::messages::SendMessage {
            no_webpage: true,
            silent: false,
            background: false,
            clear_draft: false,
            noforwards: false,
            update_stickersets_order: false,
            invert_media: false,
            allow_paid_floodskip: false,
            peer: enums::InputPeer::PeerSelf,
            reply_to: None,
            message: "héllo".into(),
            random_id: 42,
            reply_markup: None,
            entities: None,
            schedule_date: None,
            schedule_repeat_period: None,
            send_as: None,
            quick_reply_shortcut: None,
            effect: None,
            allow_paid_stars: None,
            suggested_post: None,
            rich_message: None,
        };
        let bytes = request.to_bytes();
        assert_eq!(
            constructor_id(&bytes),
            Some(functions::messages::SendMessage::CONSTRUCTOR_ID)
        );
        let mut cursor = Cursor::from_slice(&bytes[4..]);
        let back = functions::messages::SendMessage::deserialize(&mut cursor);
        assert!(matches!(back, Ok(ref r) if r.message == "héllo" && r.random_id == 42));
        assert_eq!(
            name_for_id(functions::messages::SendMessage::CONSTRUCTOR_ID),
            "messages.sendMessage"
        );
    }

    #[test]
    fn a_truncated_object_is_an_error_not_a_panic() {
        let user = enums::InputUser::User(types::InputUser {
            user_id: 7,
            access_hash: 9,
        });
        let bytes = user.to_bytes();
        for cut in 0..bytes.len() {
            let mut cursor = Cursor::from_slice(&bytes[..cut]);
            assert!(enums::InputUser::deserialize(&mut cursor).is_err());
        }
    }

    #[test]
    fn the_service_schema_is_generated_too() {
        let ping = functions::Ping { ping_id: 5 };
        assert_eq!(constructor_id(&ping.to_bytes()), Some(0x7abe77ec));
        assert_eq!(name_for_id(0xbe7e8ef1), "req_pq_multi");
    }
}
