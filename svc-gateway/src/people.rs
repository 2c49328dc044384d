//! The SQL of what users know of each other: profiles as a viewer finds them, profile
//! changes, privacy rules and contacts. Statements of more than a line are in `sql/`.

use std::collections::HashMap;

use sqlx::{PgConnection, PgPool};

use crate::{
    accounts::Profile,
    privacy::{Key, Rule, Value},
    profile_columns,
};

/// A profile as one viewer finds it: the profile, her own names for its user when he is her
/// contact, and whether he keeps her as a contact.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct FoundProfile {
    #[sqlx(flatten)]
    pub profile: Profile,
    pub contact_first_name: Option<String>,
    pub contact_last_name: Option<String>,
    pub keeps_viewer: bool,
}

/// A user as one viewer finds her, with her last time online (Unix seconds) when one is kept.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct FoundUser {
    #[sqlx(flatten)]
    pub found: FoundProfile,
    pub was_online: Option<i64>,
}

/// The users with these ids as `viewer` finds them, ascending, with their last seen (primary
/// keys of users, contacts and last_seen).
pub async fn profiles_for_viewer(
    pool: &PgPool,
    viewer: i64,
    ids: &[i64],
) -> Result<Vec<FoundUser>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/profiles_for_viewer.sql"))
        .bind(ids)
        .bind(viewer)
        .fetch_all(pool)
        .await
}

/// The user with this username, whatever its case (index users_username).
pub async fn profile_by_username(
    pool: &PgPool,
    username: &str,
) -> Result<Option<Profile>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        profile_columns!(),
        " FROM users WHERE lower(username) = lower($1)"
    ))
    .bind(username)
    .fetch_optional(pool)
    .await
}

/// The users of these phones: (id, phone) (unique index on users.phone).
pub async fn users_by_phones(
    pool: &PgPool,
    phones: &[String],
) -> Result<Vec<(i64, String)>, sqlx::Error> {
    sqlx::query_as("SELECT id, phone FROM users WHERE phone = ANY($1)")
        .bind(phones)
        .fetch_all(pool)
        .await
}

/// A user's profile, locked for a change in `tx` (primary key of users).
pub async fn lock_profile(tx: &mut PgConnection, id: i64) -> Result<Option<Profile>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        profile_columns!(),
        " FROM users WHERE id = $1 FOR UPDATE"
    ))
    .bind(id)
    .fetch_optional(tx)
    .await
}

/// Stores a changed profile; `false` when its username is another user's (the unique index
/// refused it; `tx` is then aborted).
pub async fn save_profile(tx: &mut PgConnection, p: &Profile) -> Result<bool, sqlx::Error> {
    let saved = sqlx::query(include_str!("../sql/save_profile.sql"))
        .bind(p.id)
        .bind(&p.first_name)
        .bind(&p.last_name)
        .bind(&p.username)
        .bind(&p.about)
        .bind(p.photo_file_id)
        .execute(tx)
        .await;
    match saved {
        Ok(_) => Ok(true),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Ok(false),
        Err(e) => Err(e),
    }
}

#[derive(sqlx::FromRow)]
struct RuleRow {
    user_id: i64,
    key: i16,
    value: i16,
    allow_user_ids: Vec<i64>,
    deny_user_ids: Vec<i64>,
}

/// The privacy rules of several users, with each key's default where one set none.
#[derive(Debug, Default)]
pub struct Rules(HashMap<(i64, Key), Rule>);

impl Rules {
    /// `user_id`'s rule for `key`.
    pub fn of(&self, user_id: i64, key: Key) -> Rule {
        self.0
            .get(&(user_id, key))
            .cloned()
            .unwrap_or_else(|| Rule::default_for(key))
    }
}

/// The rules of these users for these keys (primary key of privacy_rules).
pub async fn privacy_rules(
    pool: &PgPool,
    user_ids: &[i64],
    keys: &[Key],
) -> Result<Rules, sqlx::Error> {
    let numbers: Vec<i16> = keys.iter().map(|k| k.number()).collect();
    let rows: Vec<RuleRow> = sqlx::query_as(
        "SELECT user_id, key, value, allow_user_ids, deny_user_ids FROM privacy_rules \
         WHERE user_id = ANY($1) AND key = ANY($2)",
    )
    .bind(user_ids)
    .bind(&numbers)
    .fetch_all(pool)
    .await?;
    let mut rules = HashMap::new();
    for r in rows {
        let (Some(key), Some(value)) = (
            Key::from_number(r.key as i32),
            Value::from_number(r.value as i32),
        ) else {
            continue;
        };
        let rule = Rule {
            key,
            value,
            allow: r.allow_user_ids,
            deny: r.deny_user_ids,
        };
        rules.insert((r.user_id, key), rule);
    }
    Ok(Rules(rules))
}

/// Replaces a user's rule for its key (primary key of privacy_rules).
pub async fn set_privacy_rule(
    tx: &mut PgConnection,
    user_id: i64,
    rule: &Rule,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/set_privacy_rule.sql"))
        .bind(user_id)
        .bind(rule.key.number())
        .bind(rule.value.number())
        .bind(&rule.allow)
        .bind(&rule.deny)
        .execute(tx)
        .await?;
    Ok(())
}

/// A contact as its owner names it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ContactName {
    pub contact_user_id: i64,
    pub first_name: String,
    pub last_name: String,
}

/// Adds or renames `owner`'s contacts; returns those that changed (primary key of contacts).
pub async fn upsert_contacts(
    tx: &mut PgConnection,
    owner: i64,
    contacts: &[ContactName],
) -> Result<Vec<ContactName>, sqlx::Error> {
    if contacts.is_empty() {
        return Ok(vec![]);
    }
    let ids: Vec<i64> = contacts.iter().map(|c| c.contact_user_id).collect();
    let first: Vec<&str> = contacts.iter().map(|c| c.first_name.as_str()).collect();
    let last: Vec<&str> = contacts.iter().map(|c| c.last_name.as_str()).collect();
    let mut changed: Vec<ContactName> = sqlx::query_as(include_str!("../sql/upsert_contacts.sql"))
        .bind(owner)
        .bind(&ids)
        .bind(&first)
        .bind(&last)
        .fetch_all(&mut *tx)
        .await?;
    changed.sort_by_key(|c| c.contact_user_id);
    bump_contacts_version(tx, owner, !changed.is_empty()).await?;
    Ok(changed)
}

/// Deletes `owner`'s contacts among `ids`; returns those deleted (primary key of contacts).
pub async fn delete_contacts(
    tx: &mut PgConnection,
    owner: i64,
    ids: &[i64],
) -> Result<Vec<i64>, sqlx::Error> {
    let mut deleted: Vec<i64> = sqlx::query_scalar(
        "DELETE FROM contacts WHERE owner_id = $1 AND contact_user_id = ANY($2) \
         RETURNING contact_user_id",
    )
    .bind(owner)
    .bind(ids)
    .fetch_all(&mut *tx)
    .await?;
    deleted.sort_unstable();
    bump_contacts_version(tx, owner, !deleted.is_empty()).await?;
    Ok(deleted)
}

/// Moves the owner's contacts version when her list changed (primary key of users).
async fn bump_contacts_version(
    tx: &mut PgConnection,
    owner: i64,
    changed: bool,
) -> Result<(), sqlx::Error> {
    if changed {
        sqlx::query("UPDATE users SET contacts_version = contacts_version + 1 WHERE id = $1")
            .bind(owner)
            .execute(tx)
            .await?;
    }
    Ok(())
}

/// A page of `owner`'s contacts' ids after `after`, ascending (primary key of contacts).
pub async fn contacts_page(
    pool: &PgPool,
    owner: i64,
    after: i64,
    limit: i32,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/contacts_page.sql"))
        .bind(owner)
        .bind(after)
        .bind(limit as i64)
        .fetch_all(pool)
        .await
}

/// Every contact of `owner`, by user id (primary key of contacts: her range of the key).
pub async fn contact_ids(pool: &PgPool, owner: i64) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT contact_user_id FROM contacts WHERE owner_id = $1")
        .bind(owner)
        .fetch_all(pool)
        .await
}

/// What GetContacts' count and hash rest on.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ContactsSummary {
    /// How many contacts she has.
    pub count: i64,
    /// Moves on every change of her list (a contact added, renamed or deleted).
    pub version: i64,
    /// A digest of her contacts' own profiles: moves when one of them changes his.
    pub profiles: i64,
    /// A digest of what decides how much of each contact she sees (whether he keeps her, his
    /// rules for the keys a contact list shows, as they name her): moves when one changes.
    pub sights: i64,
    /// Her contacts' ids, ascending.
    pub ids: Vec<i64>,
}

/// The privacy keys whose rules decide what a contact list shows of a contact: his phone and
/// photo (the user view) and his status (the last-seen sight).
pub const CONTACT_LIST_KEYS: [Key; 3] = [Key::PhoneNumber, Key::ProfilePhoto, Key::LastSeen];

impl ContactsSummary {
    /// GetContacts' hash: any change of the list, of a contact's profile or of what the owner
    /// may see of a contact (his rules, whether he keeps her, whether he blocked her: those of
    /// `blocked_by`, the contacts who blocked her) changes it; never 0, which a client sends
    /// when it holds no list.
    pub fn hash(&self, blocked_by: &[i64]) -> i64 {
        let mut blocked = blocked_by.to_vec();
        blocked.sort_unstable();
        blocked.dedup();
        // An order-dependent fold over the sorted ids: the same set always digests alike.
        let blocks = blocked.iter().fold(0i64, |h, id| {
            (h ^ id).wrapping_mul(0x0000_0100_0000_01B3_u64 as i64)
        });
        let mix = |h: i64, v: i64| (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64);
        match mix(mix(mix(self.version, self.profiles), self.sights), blocks) {
            0 => 1,
            h => h,
        }
    }
}

/// How many contacts `owner` has, the version of her list, the digests of her contacts'
/// profiles and of what she may see of them, and their ids (primary keys of contacts, users
/// and privacy_rules; sql/contacts_summary.sql).
pub async fn contacts_summary(pool: &PgPool, owner: i64) -> Result<ContactsSummary, sqlx::Error> {
    let keys: Vec<i16> = CONTACT_LIST_KEYS.iter().map(|k| k.number()).collect();
    sqlx::query_as(include_str!("../sql/contacts_summary.sql"))
        .bind(owner)
        .bind(&keys)
        .fetch_one(pool)
        .await
}

/// Who keeps `user_id` as a contact, at most `limit` of them (index contacts_by_contact).
pub async fn keepers_of(pool: &PgPool, user_id: i64, limit: i64) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT owner_id FROM contacts WHERE contact_user_id = $1 LIMIT $2")
        .bind(user_id)
        .bind(limit)
        .fetch_all(pool)
        .await
}

/// One user as one viewer finds her (`FoundProfile`), with the viewer.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct FoundBy {
    pub viewer_id: i64,
    #[sqlx(flatten)]
    pub found: FoundProfile,
}

/// The user `user_id` as each of `viewers` finds her (primary keys of users and contacts);
/// none when she does not exist.
pub async fn profile_for_viewers(
    pool: &PgPool,
    user_id: i64,
    viewers: &[i64],
) -> Result<Vec<FoundBy>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/profile_for_viewers.sql"))
        .bind(user_id)
        .bind(viewers)
        .fetch_all(pool)
        .await
}

/// Which of `users` `owner_id` keeps as contacts (primary key of contacts).
pub async fn kept_of(pool: &PgPool, owner_id: i64, users: &[i64]) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT contact_user_id FROM contacts WHERE owner_id = $1 AND contact_user_id = ANY($2)",
    )
    .bind(owner_id)
    .bind(users)
    .fetch_all(pool)
    .await
}

/// Which of `owners` keep `user_id` as a contact (primary key of contacts).
pub async fn kept_by(pool: &PgPool, user_id: i64, owners: &[i64]) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT owner_id FROM contacts WHERE owner_id = ANY($1) AND contact_user_id = $2",
    )
    .bind(owners)
    .bind(user_id)
    .fetch_all(pool)
    .await
}
