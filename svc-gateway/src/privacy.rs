//! Privacy rules: who sees a user's phone number, last-seen time and profile photo, and who
//! finds her by phone. The one place these decisions are made; the user view
//! (`user_view.rs`), the resolve calls and presence ask here.

use oxigram_errors::{ErrorCode, status};
use oxigram_proto::types::v1::{PrivacyRule, privacy_rule};
use tonic::Status;

/// Most users one exception list of a rule may name.
pub const MAX_EXCEPTIONS: usize = 1000;

/// What a rule is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    PhoneNumber,
    LastSeen,
    ProfilePhoto,
    FindByPhone,
}

impl Key {
    pub const ALL: [Key; 4] = [
        Key::PhoneNumber,
        Key::LastSeen,
        Key::ProfilePhoto,
        Key::FindByPhone,
    ];

    /// The number stored (`privacy_rules.key`) and sent (`PrivacyRule.Key`): the same.
    pub fn number(self) -> i16 {
        match self {
            Key::PhoneNumber => 1,
            Key::LastSeen => 2,
            Key::ProfilePhoto => 3,
            Key::FindByPhone => 4,
        }
    }

    pub fn from_number(n: i32) -> Option<Key> {
        Key::ALL.into_iter().find(|k| k.number() as i32 == n)
    }

    /// The rule of a user who never set one: as Telegram's, her phone number for her
    /// contacts, the rest for everybody.
    pub fn default_value(self) -> Value {
        match self {
            Key::PhoneNumber => Value::Contacts,
            Key::LastSeen | Key::ProfilePhoto | Key::FindByPhone => Value::Everybody,
        }
    }
}

/// Whom a rule lets see, before its exceptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    Everybody,
    Contacts,
    Nobody,
}

impl Value {
    pub fn number(self) -> i16 {
        match self {
            Value::Everybody => 1,
            Value::Contacts => 2,
            Value::Nobody => 3,
        }
    }

    pub fn from_number(n: i32) -> Option<Value> {
        [Value::Everybody, Value::Contacts, Value::Nobody]
            .into_iter()
            .find(|v| v.number() as i32 == n)
    }
}

/// One rule of one user's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub key: Key,
    pub value: Value,
    /// Users who may, whatever `value` says.
    pub allow: Vec<i64>,
    /// Users who may not, whatever `value` and `allow` say.
    pub deny: Vec<i64>,
}

impl Rule {
    /// The rule of a user who never set this key.
    pub fn default_for(key: Key) -> Rule {
        Rule {
            key,
            value: key.default_value(),
            allow: vec![],
            deny: vec![],
        }
    }

    /// Whether the viewer in `relation` may see (or find) what this rule guards.
    pub fn allows(&self, relation: &Relation) -> bool {
        if relation.is_owner() {
            return true;
        }
        // Whoever she blocked sees nothing private of hers, whatever her rules say.
        if relation.blocked_by_owner {
            return false;
        }
        if self.deny.contains(&relation.viewer_id) {
            return false;
        }
        if self.allow.contains(&relation.viewer_id) {
            return true;
        }
        match self.value {
            Value::Everybody => true,
            Value::Contacts => relation.in_owner_contacts,
            Value::Nobody => false,
        }
    }

    /// The rule a client sends, checked: a known key and value, at most
    /// [`MAX_EXCEPTIONS`] users per list, ids above 0; repeats count once, and a user in both
    /// lists is denied.
    pub fn from_proto(rule: &PrivacyRule) -> Result<Rule, Status> {
        let key = Key::from_number(rule.key)
            .ok_or_else(|| status(ErrorCode::PrivacyKeyInvalid, "no such privacy key"))?;
        let value = Value::from_number(rule.value)
            .ok_or_else(|| status(ErrorCode::PrivacyValueInvalid, "no such privacy value"))?;
        let list = |ids: &[i64]| -> Result<Vec<i64>, Status> {
            if ids.len() > MAX_EXCEPTIONS {
                return Err(status(
                    ErrorCode::LimitInvalid,
                    "too many users in an exception list",
                ));
            }
            if ids.iter().any(|&id| id <= 0) {
                return Err(status(
                    ErrorCode::UserIdInvalid,
                    "a user id must be above 0",
                ));
            }
            let mut ids = ids.to_vec();
            ids.sort_unstable();
            ids.dedup();
            Ok(ids)
        };
        let deny = list(&rule.deny_user_ids)?;
        let allow = list(&rule.allow_user_ids)?
            .into_iter()
            .filter(|id| !deny.contains(id))
            .collect();
        Ok(Rule {
            key,
            value,
            allow,
            deny,
        })
    }

    pub fn to_proto(&self) -> PrivacyRule {
        PrivacyRule {
            key: self.key.number() as i32,
            value: self.value.number() as i32,
            allow_user_ids: self.allow.clone(),
            deny_user_ids: self.deny.clone(),
        }
    }
}

// The generated enums' numbers are the ones above.
const _: () = {
    assert!(privacy_rule::Key::PhoneNumber as i32 == 1);
    assert!(privacy_rule::Key::FindByPhone as i32 == 4);
    assert!(privacy_rule::Value::Nobody as i32 == 3);
};

/// How a viewer stands to the owner of what a rule guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relation {
    pub viewer_id: i64,
    pub owner_id: i64,
    /// The owner keeps the viewer in her contacts (what `Contacts` rules mean).
    pub in_owner_contacts: bool,
    /// The owner blocked the viewer.
    pub blocked_by_owner: bool,
}

impl Relation {
    pub fn is_owner(&self) -> bool {
        self.viewer_id == self.owner_id
    }
}

/// Whether the viewer sees the owner's exact last-seen time, given the owner's last-seen
/// rule (`Rule::default_for(Key::LastSeen)` when she set none). When not, presence shows
/// the viewer only an approximate bucket (recently, within a week, within a month).
pub fn sees_exact_last_seen(owner_rule: &Rule, relation: &Relation) -> bool {
    debug_assert_eq!(owner_rule.key, Key::LastSeen);
    owner_rule.allows(relation)
}

/// How much of the owner's presence a viewer sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sight {
    /// Online until, or offline since, the exact time.
    Exact,
    /// Only a bucket of when she was last online (recently, within a week, within a month).
    Bucket,
    /// Nothing, whenever she was online: she blocked the viewer, who sees her "last seen a
    /// long time ago", as Telegram shows a blocked user.
    Nothing,
}

/// The viewer's sight of the owner's presence under her last-seen rule: a viewer she blocked
/// sees nothing, whatever the rule and its exceptions say.
pub fn last_seen_sight(owner_rule: &Rule, relation: &Relation) -> Sight {
    if relation.is_owner() {
        Sight::Exact
    } else if relation.blocked_by_owner {
        Sight::Nothing
    } else if sees_exact_last_seen(owner_rule, relation) {
        Sight::Exact
    } else {
        Sight::Bucket
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: i64 = 1;
    const VIEWER: i64 = 2;

    fn relation(in_owner_contacts: bool, blocked_by_owner: bool) -> Relation {
        Relation {
            viewer_id: VIEWER,
            owner_id: OWNER,
            in_owner_contacts,
            blocked_by_owner,
        }
    }

    fn rule(value: Value, allow: &[i64], deny: &[i64]) -> Rule {
        Rule {
            key: Key::LastSeen,
            value,
            allow: allow.to_vec(),
            deny: deny.to_vec(),
        }
    }

    /// (value, allow, deny, viewer in owner's contacts, blocked by owner, sees exact)
    type LastSeenCase = (Value, &'static [i64], &'static [i64], bool, bool, bool);

    #[test]
    fn exact_last_seen_follows_the_rule_the_relation_and_the_exceptions() {
        use Value::*;
        let cases: &[LastSeenCase] = &[
            (Everybody, &[], &[], false, false, true),
            (Everybody, &[], &[], true, false, true),
            (Everybody, &[], &[], true, true, false),
            (Everybody, &[], &[VIEWER], true, false, false),
            (Contacts, &[], &[], true, false, true),
            (Contacts, &[], &[], false, false, false),
            (Contacts, &[VIEWER], &[], false, false, true),
            (Contacts, &[], &[VIEWER], true, false, false),
            (Contacts, &[], &[], true, true, false),
            (Nobody, &[], &[], true, false, false),
            (Nobody, &[VIEWER], &[], false, false, true),
            (Nobody, &[VIEWER], &[], false, true, false),
            (Nobody, &[3], &[], true, false, false),
        ];
        for &(value, allow, deny, contact, blocked, sees) in cases {
            assert_eq!(
                sees_exact_last_seen(&rule(value, allow, deny), &relation(contact, blocked)),
                sees,
                "{value:?} allow {allow:?} deny {deny:?} contact {contact} blocked {blocked}"
            );
        }
    }

    #[test]
    fn a_blocked_viewer_sees_nothing_of_her_presence() {
        use Value::*;
        // (value, allow, contact, blocked, sight)
        let cases: &[(Value, &[i64], bool, bool, Sight)] = &[
            (Everybody, &[], false, false, Sight::Exact),
            (Everybody, &[], true, true, Sight::Nothing),
            (Contacts, &[], false, false, Sight::Bucket),
            (Contacts, &[], true, true, Sight::Nothing),
            (Nobody, &[], true, false, Sight::Bucket),
            (Nobody, &[VIEWER], false, true, Sight::Nothing),
        ];
        for &(value, allow, contact, blocked, sight) in cases {
            assert_eq!(
                last_seen_sight(&rule(value, allow, &[]), &relation(contact, blocked)),
                sight,
                "{value:?} allow {allow:?} contact {contact} blocked {blocked}"
            );
        }
        let me = Relation {
            viewer_id: OWNER,
            owner_id: OWNER,
            in_owner_contacts: false,
            blocked_by_owner: false,
        };
        assert_eq!(
            last_seen_sight(&rule(Nobody, &[], &[OWNER]), &me),
            Sight::Exact
        );
    }

    #[test]
    fn the_owner_always_sees_her_own() {
        let me = Relation {
            viewer_id: OWNER,
            owner_id: OWNER,
            in_owner_contacts: false,
            blocked_by_owner: false,
        };
        assert!(sees_exact_last_seen(
            &rule(Value::Nobody, &[], &[OWNER]),
            &me
        ));
    }

    #[test]
    fn defaults_are_telegrams() {
        assert_eq!(Key::PhoneNumber.default_value(), Value::Contacts);
        for key in [Key::LastSeen, Key::ProfilePhoto, Key::FindByPhone] {
            assert_eq!(key.default_value(), Value::Everybody);
        }
    }

    #[test]
    fn rules_from_clients_are_checked_and_normalised() {
        let ok = Rule::from_proto(&PrivacyRule {
            key: 1,
            value: 2,
            allow_user_ids: vec![5, 3, 5, 4],
            deny_user_ids: vec![4],
        });
        assert_eq!(
            ok.ok(),
            Some(Rule {
                key: Key::PhoneNumber,
                value: Value::Contacts,
                allow: vec![3, 5],
                deny: vec![4],
            })
        );
        // (key, value, allow, deny, code)
        type Refusal = (i32, i32, Vec<i64>, Vec<i64>, &'static str);
        let refused: &[Refusal] = &[
            (0, 1, vec![], vec![], "PRIVACY_KEY_INVALID"),
            (5, 1, vec![], vec![], "PRIVACY_KEY_INVALID"),
            (1, 0, vec![], vec![], "PRIVACY_VALUE_INVALID"),
            (1, 4, vec![], vec![], "PRIVACY_VALUE_INVALID"),
            (1, 1, vec![0], vec![], "USER_ID_INVALID"),
            (1, 1, vec![], vec![-3], "USER_ID_INVALID"),
            (1, 1, vec![7; MAX_EXCEPTIONS + 1], vec![], "LIMIT_INVALID"),
        ];
        for (key, value, allow, deny, code) in refused {
            let status = Rule::from_proto(&PrivacyRule {
                key: *key,
                value: *value,
                allow_user_ids: allow.clone(),
                deny_user_ids: deny.clone(),
            })
            .err();
            assert_eq!(
                status.as_ref().and_then(oxigram_errors::code_of).as_deref(),
                Some(*code),
                "key {key} value {value}"
            );
        }
    }
}
