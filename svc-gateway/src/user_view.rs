//! The user view: how one viewer sees other users. Every user the gateway returns (history,
//! messages, search, dialogs, difference, contacts, blocks, resolve) goes through
//! [`Gateway::users_for`], and each through [`view`]: the phone number and the profile photo
//! only where the owner's rules let this viewer see them, the viewer's own names for her
//! contacts, and the contact flags.

use std::collections::HashSet;

use oxigram_errors::{Error, forward};
use oxigram_proto::{messages::v1 as messages_svc, types::v1::User};
use tonic::Status;

use crate::{
    Gateway,
    people::{self, FoundProfile, FoundUser, Rules},
    privacy::{Key, Relation, Rule, last_seen_sight},
    status::{Presence, project},
    transient::now_ms,
};

/// The keys the view reads.
pub(crate) const VIEW_KEYS: [Key; 2] = [Key::PhoneNumber, Key::ProfilePhoto];
/// The view's keys and the last-seen rule that decides the status.
const USER_KEYS: [Key; 3] = [Key::PhoneNumber, Key::ProfilePhoto, Key::LastSeen];

/// How `viewer` sees the user she found as `found`, under the user's `rules`, when that user
/// blocked her (`blocked_by_owner`) or not. The owner sees all of herself.
pub fn view(viewer: i64, found: FoundProfile, rules: &Rules, blocked_by_owner: bool) -> User {
    let FoundProfile {
        profile,
        contact_first_name,
        contact_last_name,
        keeps_viewer,
    } = found;
    let relation = Relation {
        viewer_id: viewer,
        owner_id: profile.id,
        in_owner_contacts: keeps_viewer,
        blocked_by_owner,
    };
    if relation.is_owner() {
        return profile.own_view();
    }
    let contact = contact_first_name.is_some();
    let may = |key| rules.of(profile.id, key).allows(&relation);
    // A contact was imported by her phone: the viewer gave it, so she sees it again.
    let phone = if contact || may(Key::PhoneNumber) {
        profile.phone
    } else {
        String::new()
    };
    let photo_id = if may(Key::ProfilePhoto) {
        profile.photo_file_id
    } else {
        0
    };
    // The viewer's names for her contact replace the contact's own.
    let (first_name, last_name) = match contact_first_name {
        Some(first) => (first, contact_last_name.unwrap_or_default()),
        None => (profile.first_name, profile.last_name),
    };
    User {
        id: profile.id,
        first_name,
        phone,
        last_name,
        username: profile.username.unwrap_or_default(),
        about: profile.about,
        photo_id,
        contact,
        mutual_contact: contact && keeps_viewer,
        // Presence is not a profile's: `Gateway::users_for` sets it.
        status: None,
    }
}

impl Gateway {
    /// The users with these ids as `viewer` sees them, ascending by id; unknown ids are left
    /// out. Repeats count once. Profiles, rules, blocks and presence are read once each, side by
    /// side: a page of dialogs waits for the slowest of them, not for their sum.
    pub async fn users_for(&self, viewer: i64, ids: &[i64]) -> Result<Vec<User>, Status> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let others: Vec<i64> = ids.iter().copied().filter(|&id| id != viewer).collect();
        let (found, rules, blocked_by, presences) = tokio::join!(
            people::profiles_for_viewer(&self.pool, viewer, &ids),
            people::privacy_rules(&self.pool, &others, &USER_KEYS),
            self.blocked_by(viewer, &others),
            self.presence.live_presences(&ids),
        );
        let found = found.map_err(Error::from)?;
        let rules = rules.map_err(Error::from)?;
        let blocked_by = blocked_by?;
        // A status is never worth failing a call: when presence cannot be read (Redis down),
        // the users go without one. Those Redis knows nothing of are offline since the last
        // seen their rows carry.
        let presences = presences
            .inspect_err(|err| tracing::debug!(error = %err, "users answered without statuses"))
            .unwrap_or_default();
        let now = now_ms() / 1000;
        Ok(found
            .into_iter()
            .map(|row| {
                let FoundUser {
                    found: f,
                    was_online,
                } = row;
                let presence = match presences.get(&f.profile.id).copied() {
                    Some(Presence::Unknown) => Some(
                        was_online
                            .map(|was_online| Presence::Offline { was_online })
                            .unwrap_or(Presence::Unknown),
                    ),
                    live => live,
                };
                let relation = Relation {
                    viewer_id: viewer,
                    owner_id: f.profile.id,
                    in_owner_contacts: f.keeps_viewer,
                    blocked_by_owner: blocked_by.contains(&f.profile.id),
                };
                let mut user = view(viewer, f, &rules, relation.blocked_by_owner);
                user.status = presence.and_then(|presence| {
                    let sight =
                        last_seen_sight(&rules.of(relation.owner_id, Key::LastSeen), &relation);
                    project(presence, sight, now)
                });
                user
            })
            .collect())
    }

    /// The user with this id as `viewer` sees her, if she exists.
    pub async fn user_for(&self, viewer: i64, id: i64) -> Result<Option<User>, Status> {
        Ok(self.users_for(viewer, &[id]).await?.pop())
    }

    /// Which of `owners` let `viewer` find them by phone (ResolvePhone, ImportContacts).
    pub async fn findable_by_phone(
        &self,
        viewer: i64,
        owners: &[i64],
    ) -> Result<HashSet<i64>, Status> {
        self.decided_by(viewer, owners, Key::FindByPhone, Rule::allows)
            .await
    }

    /// The `owners` for whom `decide`, given each one's `key` rule and how `viewer` stands
    /// to her, says yes.
    async fn decided_by(
        &self,
        viewer: i64,
        owners: &[i64],
        key: Key,
        decide: fn(&Rule, &Relation) -> bool,
    ) -> Result<HashSet<i64>, Status> {
        let (rules, relations) = self.relations(viewer, owners, key).await?;
        Ok(relations
            .iter()
            .filter(|r| decide(&rules.of(r.owner_id, key), r))
            .map(|r| r.owner_id)
            .collect())
    }

    /// Each of `owners`' `key` rules, and how `viewer` stands to each owner.
    async fn relations(
        &self,
        viewer: i64,
        owners: &[i64],
        key: Key,
    ) -> Result<(Rules, Vec<Relation>), Status> {
        let rules = people::privacy_rules(&self.pool, owners, &[key])
            .await
            .map_err(Error::from)?;
        let keep_viewer = people::kept_by(&self.pool, viewer, owners)
            .await
            .map_err(Error::from)?;
        let others: Vec<i64> = owners.iter().copied().filter(|&o| o != viewer).collect();
        let blocked_by = self.blocked_by(viewer, &others).await?;
        let relations = owners
            .iter()
            .map(|&owner| Relation {
                viewer_id: viewer,
                owner_id: owner,
                in_owner_contacts: keep_viewer.contains(&owner),
                blocked_by_owner: blocked_by.contains(&owner),
            })
            .collect();
        Ok((rules, relations))
    }

    /// Which of `owners` blocked `viewer` (svc-messages keeps the blocks).
    pub async fn blocked_by(&self, viewer: i64, owners: &[i64]) -> Result<HashSet<i64>, Status> {
        if owners.is_empty() {
            return Ok(HashSet::new());
        }
        let request = messages_svc::BlockedByRequest {
            user_id: viewer,
            owner_ids: owners.to_vec(),
        };
        let blocked = self.messages.clone().blocked_by(request).await;
        Ok(blocked
            .map_err(forward)?
            .into_inner()
            .owner_ids
            .into_iter()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::Profile;

    const ANN: i64 = 1;
    const BOB: i64 = 2;

    fn bob(contact_names: Option<(&str, &str)>, keeps_viewer: bool) -> FoundProfile {
        FoundProfile {
            profile: Profile {
                id: BOB,
                phone: "15550002".into(),
                first_name: "Bob".into(),
                last_name: "Stone".into(),
                username: Some("bobstone".into()),
                about: "hi".into(),
                photo_file_id: 77,
            },
            contact_first_name: contact_names.map(|n| n.0.to_owned()),
            contact_last_name: contact_names.map(|n| n.1.to_owned()),
            keeps_viewer,
        }
    }

    #[test]
    fn by_default_a_stranger_sees_no_phone_but_the_photo() {
        let seen = view(ANN, bob(None, false), &Rules::default(), false);
        assert_eq!(
            (seen.phone.as_str(), seen.photo_id, seen.first_name.as_str()),
            ("", 77, "Bob")
        );
        assert_eq!((seen.contact, seen.mutual_contact), (false, false));
        assert_eq!(seen.username, "bobstone");
    }

    #[test]
    fn whom_the_owner_keeps_as_a_contact_sees_the_phone() {
        let seen = view(ANN, bob(None, true), &Rules::default(), false);
        assert_eq!(seen.phone, "15550002");
        // Blocked: nothing private.
        let blocked = view(ANN, bob(None, true), &Rules::default(), true);
        assert_eq!((blocked.phone.as_str(), blocked.photo_id), ("", 0));
    }

    #[test]
    fn the_viewers_contact_names_replace_the_owners() {
        let seen = view(
            ANN,
            bob(Some(("Bobby", "")), true),
            &Rules::default(),
            false,
        );
        assert_eq!(
            (seen.first_name.as_str(), seen.last_name.as_str()),
            ("Bobby", "")
        );
        assert_eq!((seen.contact, seen.mutual_contact), (true, true));
        // She imported him by his phone: she sees it whatever his rule.
        assert_eq!(seen.phone, "15550002");
        let one_way = view(
            ANN,
            bob(Some(("Bobby", "S")), false),
            &Rules::default(),
            false,
        );
        assert_eq!((one_way.contact, one_way.mutual_contact), (true, false));
    }

    #[test]
    fn the_owner_sees_all_of_herself() {
        let mut me = bob(None, false);
        me.profile.id = ANN;
        let seen = view(ANN, me, &Rules::default(), false);
        assert_eq!((seen.phone.as_str(), seen.photo_id), ("15550002", 77));
    }
}
