//! The people commands: contacts (import by phone, list, delete), the username, and privacy
//! rules. Each prints what the server answered.

use clap::{Subcommand, ValueEnum};
use oxigram_client::Client;
use oxigram_proto::{
    api::v1::GetContactsRequest,
    types::v1::{PrivacyRule, User, privacy_rule},
};

use crate::device::DeviceClient;

#[derive(Subcommand)]
pub enum ContactsCommand {
    /// Adds (or renames) the user with this phone as a contact, under your names for him.
    Import {
        #[arg(long)]
        phone: String,
        #[arg(long)]
        first: String,
        #[arg(long, default_value = "")]
        last: String,
    },
    /// Your contacts, ascending by id.
    List {
        #[arg(long, default_value_t = 100)]
        limit: i32,
        /// Contacts with ids above this one.
        #[arg(long, default_value_t = 0)]
        offset_user_id: i64,
    },
    /// Deletes contacts by user id.
    Delete {
        #[arg(long, value_delimiter = ',', required = true)]
        ids: Vec<i64>,
    },
}

#[derive(Subcommand)]
pub enum UsernameCommand {
    /// Sets your username.
    Set { username: String },
    /// Removes your username.
    Remove,
    /// Finds the user with a username.
    Resolve { username: String },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PrivacyKey {
    Phone,
    LastSeen,
    Photo,
    FindByPhone,
}

impl PrivacyKey {
    fn proto(self) -> privacy_rule::Key {
        match self {
            PrivacyKey::Phone => privacy_rule::Key::PhoneNumber,
            PrivacyKey::LastSeen => privacy_rule::Key::LastSeen,
            PrivacyKey::Photo => privacy_rule::Key::ProfilePhoto,
            PrivacyKey::FindByPhone => privacy_rule::Key::FindByPhone,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PrivacyValue {
    Everybody,
    Contacts,
    Nobody,
}

#[derive(Subcommand)]
pub enum PrivacyCommand {
    /// Shows one of your rules.
    Get { key: PrivacyKey },
    /// Sets one of your rules, with its exceptions (user ids).
    Set {
        key: PrivacyKey,
        value: PrivacyValue,
        #[arg(long, value_delimiter = ',')]
        allow: Vec<i64>,
        #[arg(long, value_delimiter = ',')]
        deny: Vec<i64>,
    },
}

/// A user as one line: what the server let this device see.
pub fn show_user(u: &User) -> String {
    let mut line = format!("user {} ({}", u.id, u.first_name);
    if !u.last_name.is_empty() {
        line += &format!(" {}", u.last_name);
    }
    line += ")";
    if !u.username.is_empty() {
        line += &format!(" @{}", u.username);
    }
    if !u.phone.is_empty() {
        line += &format!(" +{}", u.phone);
    }
    if u.photo_id != 0 {
        line += &format!(" photo {}", u.photo_id);
    }
    if u.mutual_contact {
        line += " [mutual contact]";
    } else if u.contact {
        line += " [contact]";
    }
    if !u.about.is_empty() {
        line += &format!(": {:?}", u.about);
    }
    line
}

pub fn show_rule(rule: &PrivacyRule) -> String {
    let key = privacy_rule::Key::try_from(rule.key)
        .map_or("?".to_owned(), |k| k.as_str_name().to_lowercase());
    let value = privacy_rule::Value::try_from(rule.value)
        .map_or("?".to_owned(), |v| v.as_str_name().to_lowercase());
    format!(
        "{key}: {value}, allow {:?}, deny {:?}",
        rule.allow_user_ids, rule.deny_user_ids
    )
}

pub async fn contacts(path: &std::path::Path, command: ContactsCommand) -> anyhow::Result<()> {
    let c = DeviceClient::open(path).await?;
    match command {
        ContactsCommand::Import { phone, first, last } => {
            let imported = c
                .client
                .import_contacts(&[(phone.as_str(), first.as_str(), last.as_str())])
                .await?;
            for u in &imported.users {
                println!("imported {}", show_user(u));
            }
            for phone in &imported.not_found {
                println!("not found: {phone}");
            }
        }
        ContactsCommand::List {
            limit,
            offset_user_id,
        } => {
            let list = c
                .client
                .get_contacts(GetContactsRequest {
                    offset_user_id,
                    limit,
                    hash: 0,
                })
                .await?;
            for u in &list.users {
                println!("{}", show_user(u));
            }
            println!("{} contacts in all", list.count);
        }
        ContactsCommand::Delete { ids } => {
            let deleted = c.client.delete_contacts(&ids).await?;
            println!("deleted {} contacts", deleted.pts_count);
        }
    }
    Ok(())
}

pub async fn username(path: &std::path::Path, command: UsernameCommand) -> anyhow::Result<()> {
    let c = DeviceClient::open(path).await?;
    let user = match command {
        UsernameCommand::Set { username } => {
            let name = username.strip_prefix('@').unwrap_or(&username);
            c.client.update_username(name).await?.user
        }
        UsernameCommand::Remove => c.client.update_username("").await?.user,
        UsernameCommand::Resolve { username } => Some(c.client.resolve_username(&username).await?),
    };
    if let Some(u) = user {
        println!("{}", show_user(&u));
    }
    Ok(())
}

pub async fn privacy(path: &std::path::Path, command: PrivacyCommand) -> anyhow::Result<()> {
    let c = DeviceClient::open(path).await?;
    let rule = match command {
        PrivacyCommand::Get { key } => c.client.get_privacy(key.proto() as i32).await?,
        PrivacyCommand::Set {
            key,
            value,
            allow,
            deny,
        } => {
            let value = match value {
                PrivacyValue::Everybody => privacy_rule::Value::Everybody,
                PrivacyValue::Contacts => privacy_rule::Value::Contacts,
                PrivacyValue::Nobody => privacy_rule::Value::Nobody,
            };
            let rule = PrivacyRule {
                key: key.proto() as i32,
                value: value as i32,
                allow_user_ids: allow,
                deny_user_ids: deny,
            };
            c.client.set_privacy(rule).await?.rule.unwrap_or_default()
        }
    };
    println!("{}", show_rule(&rule));
    Ok(())
}

/// A user id named by `@username`.
pub async fn resolve_username(c: &Client, username: &str) -> anyhow::Result<i64> {
    Ok(c.resolve_username(username).await?.id)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::{Cli, Command};

    #[test]
    fn a_user_shows_what_the_server_let_the_device_see() {
        let mut u = User {
            id: 7,
            first_name: "Olga".into(),
            ..Default::default()
        };
        assert_eq!(show_user(&u), "user 7 (Olga)");
        u.last_name = "K".into();
        u.username = "olga_k".into();
        u.phone = "15550001".into();
        u.photo_id = 3;
        u.contact = true;
        u.mutual_contact = true;
        u.about = "maps".into();
        assert_eq!(
            show_user(&u),
            "user 7 (Olga K) @olga_k +15550001 photo 3 [mutual contact]: \"maps\""
        );
    }

    #[test]
    fn a_rule_shows_its_key_value_and_exceptions() {
        let rule = PrivacyRule {
            key: privacy_rule::Key::LastSeen as i32,
            value: privacy_rule::Value::Contacts as i32,
            allow_user_ids: vec![4],
            deny_user_ids: vec![],
        };
        assert_eq!(show_rule(&rule), "last_seen: contacts, allow [4], deny []");
    }

    #[test]
    fn the_people_commands_parse() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).map(|c| c.command);
        assert!(matches!(
            parse(&[
                "oxictl", "contacts", "import", "--phone", "+1555", "--first", "A"
            ]),
            Ok(Command::Contacts(ContactsCommand::Import { .. }))
        ));
        assert!(matches!(
            parse(&["oxictl", "contacts", "delete", "--ids", "3,4"]),
            Ok(Command::Contacts(ContactsCommand::Delete { ids })) if ids == [3, 4]
        ));
        assert!(matches!(
            parse(&["oxictl", "username", "set", "olga_k"]),
            Ok(Command::Username(UsernameCommand::Set { .. }))
        ));
        assert!(matches!(
            parse(&[
                "oxictl", "privacy", "set", "phone", "nobody", "--allow", "5"
            ]),
            Ok(Command::Privacy(PrivacyCommand::Set {
                key: PrivacyKey::Phone,
                value: PrivacyValue::Nobody,
                ..
            }))
        ));
        assert!(parse(&["oxictl", "privacy", "set", "phone", "friends"]).is_err());
    }
}
