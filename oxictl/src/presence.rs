//! Typing and presence on the command line: actions given as `KIND[:PROGRESS]` (`typing`,
//! `cancel`, `upload_photo:40`, `choose_sticker`), and the transient events `watch` prints.

use oxigram_client::{StatusChange, Typing};
use oxigram_proto::types::v1::{SendMessageAction, send_message_action::Kind, user_status};
use tokio::time::Instant;

/// An action from `KIND[:PROGRESS]`; the progress (0 to 100) is for the upload kinds.
pub fn parse_action(s: &str) -> Result<SendMessageAction, String> {
    let (kind, progress) = match s.split_once(':') {
        Some((kind, progress)) => (
            kind,
            progress.parse().map_err(|e| format!("progress: {e}"))?,
        ),
        None => (s, 0),
    };
    let kind = Kind::from_str_name(&kind.to_ascii_uppercase())
        .filter(|k| *k != Kind::Unspecified)
        .ok_or_else(|| format!("unknown action {kind:?}"))?;
    Ok(SendMessageAction {
        kind: kind as i32,
        progress,
    })
}

/// `user 5 is typing (for 6.0 s)`, `user 5 uploads a photo (40%) …`, `user 5 stopped`.
pub fn show_typing(t: &Typing, now: Instant) -> String {
    let kind = Kind::try_from(t.action.kind).unwrap_or(Kind::Unspecified);
    if kind == Kind::Cancel {
        return format!("user {} stopped", t.user_id);
    }
    let what = kind.as_str_name().to_ascii_lowercase().replace('_', " ");
    let progress = if t.action.progress > 0 {
        format!(" {}%", t.action.progress)
    } else {
        String::new()
    };
    format!(
        "user {}: {what}{progress} (for {:.1} s)",
        t.user_id,
        t.timeout(now).as_secs_f64()
    )
}

/// `user 5 is online until 1700000000`, `user 5 was online at …`, `user 5 was online recently`.
pub fn show_status(s: &StatusChange) -> String {
    let status = match s.status.as_ref().and_then(|s| s.kind.as_ref()) {
        Some(user_status::Kind::Online(o)) => format!("is online (until {})", o.expires),
        Some(user_status::Kind::Offline(o)) => format!("was online at {}", o.was_online),
        Some(user_status::Kind::Recently(_)) => "was online recently".into(),
        Some(user_status::Kind::LastWeek(_)) => "was online within a week".into(),
        Some(user_status::Kind::LastMonth(_)) => "was online within a month".into(),
        None => "was online a long time ago".into(),
    };
    format!("user {} {status}", s.user_id)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use oxigram_proto::types::v1::{UserStatus, UserStatusOffline};

    use super::*;

    #[test]
    fn actions_parse_and_events_print() {
        let a = parse_action("upload_photo:40");
        assert_eq!(
            a,
            Ok(SendMessageAction {
                kind: Kind::UploadPhoto as i32,
                progress: 40
            })
        );
        assert!(parse_action("dance").is_err());
        assert!(parse_action("unspecified").is_err());
        let now = Instant::now();
        let typing = Typing {
            user_id: 5,
            action: parse_action("typing").unwrap_or_default(),
            expires_at: now + Duration::from_secs(6),
        };
        assert_eq!(show_typing(&typing, now), "user 5: typing (for 6.0 s)");
        let cancel = Typing {
            action: parse_action("cancel").unwrap_or_default(),
            ..typing
        };
        assert_eq!(show_typing(&cancel, now), "user 5 stopped");
        let offline = StatusChange {
            user_id: 5,
            status: Some(UserStatus {
                kind: Some(user_status::Kind::Offline(UserStatusOffline {
                    was_online: 7,
                })),
            }),
        };
        assert_eq!(show_status(&offline), "user 5 was online at 7");
    }
}
