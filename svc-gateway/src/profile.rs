//! The rules of a profile's fields: names, username and about text, checked at the boundary
//! (sign-up, profile changes, contact imports, resolving a username). Each returns the value
//! to store.

use oxigram_errors::{ErrorCode, check_text, status};
use tonic::Status;

/// Longest first or last name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest about text, in characters.
pub const MAX_ABOUT_CHARS: usize = 70;
pub const MIN_USERNAME_CHARS: usize = 5;
pub const MAX_USERNAME_CHARS: usize = 32;

/// A first name: trimmed, 1 to 64 characters (`FIRSTNAME_INVALID`).
pub fn first_name(field: &str, value: &str) -> Result<String, Status> {
    check_text(field, value)?;
    let name = value.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(status(
            ErrorCode::FirstnameInvalid,
            "a first name is 1 to 64 characters",
        ));
    }
    Ok(name.to_owned())
}

/// A last name: trimmed, at most 64 characters, may be empty (`LASTNAME_INVALID`).
pub fn last_name(field: &str, value: &str) -> Result<String, Status> {
    check_text(field, value)?;
    let name = value.trim();
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(status(
            ErrorCode::LastnameInvalid,
            "a last name is at most 64 characters",
        ));
    }
    Ok(name.to_owned())
}

/// An about text: trimmed, at most 70 characters (`ABOUT_TOO_LONG`).
pub fn about(value: &str) -> Result<String, Status> {
    check_text("about", value)?;
    let about = value.trim();
    if about.chars().count() > MAX_ABOUT_CHARS {
        return Err(status(
            ErrorCode::AboutTooLong,
            "an about text is at most 70 characters",
        ));
    }
    Ok(about.to_owned())
}

/// A username as its owner sets it: 5 to 32 characters of a-z (either case), 0-9 and `_`,
/// starting with a letter, with no `__` and no `_` at the end (`USERNAME_INVALID`). Kept as
/// typed; two that differ only in case are the same username.
pub fn username(value: &str) -> Result<String, Status> {
    check_text("username", value)?;
    let invalid = || {
        status(
            ErrorCode::UsernameInvalid,
            "5 to 32 of a-z, 0-9 and _, starting with a letter, no __ and no _ at the end",
        )
    };
    let len = value.chars().count();
    if !(MIN_USERNAME_CHARS..=MAX_USERNAME_CHARS).contains(&len) {
        return Err(invalid());
    }
    let allowed = value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let starts_with_letter = value.starts_with(|c: char| c.is_ascii_alphabetic());
    if !allowed || !starts_with_letter || value.ends_with('_') || value.contains("__") {
        return Err(invalid());
    }
    Ok(value.to_owned())
}

/// A username a caller looks up: an optional leading `@`, then the username rules.
pub fn username_to_resolve(value: &str) -> Result<String, Status> {
    username(value.strip_prefix('@').unwrap_or(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<String, Status>) -> Option<String> {
        r.err().as_ref().and_then(oxigram_errors::code_of)
    }

    #[test]
    fn usernames_follow_telegrams_rules() {
        let valid = ["alice", "Alice_Smith", "a1234", "bob_2_x", &"a".repeat(32)];
        for name in valid {
            assert_eq!(username(name).ok().as_deref(), Some(name), "{name}");
        }
        let invalid = [
            "",
            "abcd",
            &"a".repeat(33),
            "1alice",
            "_alice",
            "alice_",
            "ali__ce",
            "ali-ce",
            "ali ce",
            "alicé",
            "al\u{0}ice",
        ];
        for name in invalid {
            let expected = if name.contains('\0') {
                "INPUT_TEXT_INVALID"
            } else {
                "USERNAME_INVALID"
            };
            assert_eq!(code(username(name)).as_deref(), Some(expected), "{name:?}");
        }
        assert_eq!(username_to_resolve("@alice").ok().as_deref(), Some("alice"));
        assert_eq!(
            code(username_to_resolve("@@alice")).as_deref(),
            Some("USERNAME_INVALID")
        );
    }

    #[test]
    fn names_and_about_have_their_limits() {
        assert_eq!(
            first_name("first_name", "  Al ").ok().as_deref(),
            Some("Al")
        );
        assert_eq!(last_name("last_name", "  ").ok().as_deref(), Some(""));
        assert_eq!(
            about(&"é".repeat(70)).map(|a| a.chars().count()).ok(),
            Some(70)
        );
        // (result, code)
        let refused = [
            (first_name("first_name", "   "), "FIRSTNAME_INVALID"),
            (
                first_name("first_name", &"x".repeat(65)),
                "FIRSTNAME_INVALID",
            ),
            (last_name("last_name", &"x".repeat(65)), "LASTNAME_INVALID"),
            (about(&"x".repeat(71)), "ABOUT_TOO_LONG"),
            (about("a\0b"), "INPUT_TEXT_INVALID"),
            (last_name("last_name", "a\0b"), "INPUT_TEXT_INVALID"),
        ];
        for (result, expected) in refused {
            assert_eq!(code(result).as_deref(), Some(expected));
        }
    }
}
