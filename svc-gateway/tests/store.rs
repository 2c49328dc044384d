//! The gateway's store (accounts, auth keys, login codes, device state) against its own
//! migrated schema.

use anyhow::Context;
use oxigram_testkit::store::{self, Migrated};
use svc_gateway::{
    accounts::{self, CodeCheck},
    last_seen,
    mtproto::keys,
    people,
};

async fn schema() -> anyhow::Result<Migrated> {
    store::migrated(
        svc_gateway::SCHEMA,
        &[&svc_gateway::MIGRATOR, &oxigram_outbox::MIGRATOR],
    )
    .await
}

#[tokio::test]
async fn auth_keys_are_stored_once_and_bound_and_unbound() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    assert_eq!(accounts::auth_key(pool, 7).await?, None);
    assert!(accounts::insert_auth_key(pool, 7, b"hash-a", "phone").await?);
    // The id is taken: the first secret stays.
    assert!(!accounts::insert_auth_key(pool, 7, b"hash-b", "laptop").await?);
    assert_eq!(
        accounts::auth_key(pool, 7).await?,
        Some((b"hash-a".to_vec(), None))
    );

    let alice = accounts::insert_user(pool, "+100", "Alice")
        .await?
        .context("a new phone")?;
    accounts::bind_auth_key(pool, 7, Some(alice.id)).await?;
    assert_eq!(
        accounts::auth_key(pool, 7).await?,
        Some((b"hash-a".to_vec(), Some(alice.id)))
    );
    accounts::bind_auth_key(pool, 7, None).await?;
    assert_eq!(
        accounts::auth_key(pool, 7).await?,
        Some((b"hash-a".to_vec(), None))
    );
    Ok(())
}

#[tokio::test]
async fn keys_signed_in_or_out_since_a_moment_are_named() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    let alice = accounts::insert_user(pool, "+100", "Alice")
        .await?
        .context("a new phone")?;
    for id in [1, 2, 3] {
        assert!(accounts::insert_auth_key(pool, id, b"hash", "phone").await?);
    }
    accounts::bind_auth_key(pool, 1, Some(alice.id)).await?;
    let before = accounts::rebound_auth_keys(pool, chrono::DateTime::UNIX_EPOCH, 100).await?;
    assert_eq!(
        before.auth_key_ids,
        vec![1],
        "only a bound key; never-bound keys are not"
    );

    let since = before.checked_at;
    accounts::bind_auth_key(pool, 2, Some(alice.id)).await?;
    assert!(accounts::unbind_if_owned(pool, 1, alice.id).await?);
    let mut after = accounts::rebound_auth_keys(pool, since, 100).await?;
    after.auth_key_ids.sort();
    assert_eq!(after.auth_key_ids, vec![1, 2], "a sign-in and a sign-out");
    assert!(after.checked_at >= since);

    let later =
        accounts::rebound_auth_keys(pool, after.checked_at + chrono::TimeDelta::seconds(1), 100)
            .await?;
    assert!(later.auth_key_ids.is_empty());
    let capped = accounts::rebound_auth_keys(pool, since, 1).await?;
    assert_eq!(capped.auth_key_ids.len(), 1, "at most the limit");
    Ok(())
}

/// An MTProto key's row as auth key creation stores it: permanent, or temporary for an hour.
async fn mtproto_key(pool: &sqlx::PgPool, id: i64, temporary: bool) -> anyhow::Result<()> {
    let expires_at = temporary.then(|| chrono_now() + 3600);
    anyhow::ensure!(keys::insert(pool, id, b"hash", &[id as u8; 256], expires_at).await?);
    Ok(())
}

#[tokio::test]
async fn binding_a_temporary_key_ends_the_one_its_permanent_key_had() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    let in_an_hour = i32::try_from(chrono_now() + 3600)?;
    // Permanent keys 1 and 2; temporary keys 11, 12 and 13 for 1, 21 for 2.
    for (id, temporary) in [
        (1, false),
        (2, false),
        (11, true),
        (12, true),
        (13, true),
        (21, true),
    ] {
        mtproto_key(pool, id, temporary).await?;
    }
    let bound = |ended: Vec<i64>| keys::Binding::Bound { ended };
    assert_eq!(
        keys::bind_temp(pool, 11, 1, in_an_hour).await?,
        bound(vec![])
    );
    assert_eq!(
        keys::bind_temp(pool, 21, 2, in_an_hour).await?,
        bound(vec![])
    );
    assert_eq!(keys::acting_key(pool, 11).await?.map(|k| k.0), Some(1));
    let since = accounts::rebound_auth_keys(pool, chrono::DateTime::UNIX_EPOCH, 100)
        .await?
        .checked_at;

    // 12 replaces 11: 11 is an unknown key from now on, for finding and for acting.
    assert_eq!(
        keys::bind_temp(pool, 12, 1, in_an_hour).await?,
        bound(vec![11])
    );
    assert_eq!(keys::find(pool, 11).await?, None);
    assert_eq!(keys::acting_key(pool, 11).await?, None);
    assert_eq!(keys::acting_key(pool, 12).await?.map(|k| k.0), Some(1));
    let (_, expires_at) = keys::find(pool, 12).await?.context("12 is bound")?;
    assert_eq!(expires_at, Some(i64::from(in_an_hour)));
    // Another permanent key's temporary key is untouched, and so is the permanent key.
    assert_eq!(keys::acting_key(pool, 21).await?.map(|k| k.0), Some(2));
    assert_eq!(keys::acting_key(pool, 1).await?.map(|k| k.0), Some(1));
    // Every instance hears of both: the new binding and the key it ended.
    let mut rebound = accounts::rebound_auth_keys(pool, since, 100)
        .await?
        .auth_key_ids;
    rebound.sort_unstable();
    assert_eq!(rebound, vec![11, 12]);

    // Request → what the bind does.
    let cases: [(i64, i64, keys::Binding, &str); 4] = [
        (
            12,
            1,
            bound(vec![]),
            "the same binding again: nothing else to end",
        ),
        (
            12,
            2,
            keys::Binding::Refused,
            "bound to another permanent key",
        ),
        (
            11,
            1,
            keys::Binding::Ended,
            "replaced: it cannot come back and end 12",
        ),
        (11, 2, keys::Binding::Ended, "replaced: nor bind elsewhere"),
    ];
    for (temp, perm, expected, why) in cases {
        assert_eq!(
            keys::bind_temp(pool, temp, perm, in_an_hour).await?,
            expected,
            "{why}"
        );
    }
    assert_eq!(keys::acting_key(pool, 12).await?.map(|k| k.0), Some(1));
    assert_eq!(keys::acting_key(pool, 21).await?.map(|k| k.0), Some(2));

    // Two binds to one permanent key at once: one of them ends the other, whichever ran first.
    assert_eq!(
        keys::bind_temp(pool, 13, 1, in_an_hour).await?,
        bound(vec![12])
    );
    for round in 0..6_i64 {
        let (a, b) = (100 + 2 * round, 101 + 2 * round);
        mtproto_key(pool, a, true).await?;
        mtproto_key(pool, b, true).await?;
        let (first, second) = tokio::join!(
            keys::bind_temp(pool, a, 1, in_an_hour),
            keys::bind_temp(pool, b, 1, in_an_hour)
        );
        assert!(matches!(first?, keys::Binding::Bound { .. }));
        assert!(matches!(second?, keys::Binding::Bound { .. }));
        let mut acting = Vec::new();
        for id in [13, a, b] {
            if keys::acting_key(pool, id).await?.is_some() {
                acting.push(id);
            }
        }
        assert_eq!(acting.len(), 1, "round {round}: {acting:?} act for key 1");
    }

    // The bind finds the permanent key's temporary keys by auth_keys_perm_key.
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL enable_seqscan = off")
        .execute(&mut *tx)
        .await?;
    let plan: Vec<String> = sqlx::query_scalar(concat!(
        "EXPLAIN ",
        include_str!("../sql/bind_temp_key.sql")
    ))
    .bind(12_i64)
    .bind(1_i64)
    .bind(f64::from(in_an_hour))
    .fetch_all(&mut *tx)
    .await?;
    tx.rollback().await?;
    assert!(
        plan.iter().any(|line| line.contains("auth_keys_perm_key")),
        "{plan:#?}"
    );
    Ok(())
}

#[tokio::test]
async fn users_by_phone_and_by_ids() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    assert_eq!(accounts::user_by_phone(pool, "+100").await?, None);
    let alice = accounts::insert_user(pool, "+100", "Alice")
        .await?
        .context("a new phone")?;
    assert_eq!(
        (alice.phone.as_str(), alice.first_name.as_str()),
        ("+100", "Alice")
    );
    // The phone is taken.
    assert_eq!(accounts::insert_user(pool, "+100", "Mallory").await?, None);
    let bob = accounts::insert_user(pool, "+200", "Bob")
        .await?
        .context("a new phone")?;
    assert_eq!(
        accounts::user_by_phone(pool, "+100").await?,
        Some(alice.clone())
    );
    // Ordered by id; unknown ids are left out.
    let found = accounts::profiles_by_ids(pool, &[bob.id, 999_999, alice.id]).await?;
    assert_eq!(found, vec![alice, bob]);
    assert!(accounts::profiles_by_ids(pool, &[]).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn login_codes_are_checked_counted_and_used_up() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    accounts::insert_login_code(pool, "h1", "+100", "12345", 60).await?;
    accounts::insert_login_code(pool, "old", "+100", "12345", -1).await?;
    // (hash, phone, code) -> outcome, in order: each check sees the ones before it.
    let checks = [
        (("nope", "+100", "12345"), CodeCheck::Expired),
        (("old", "+100", "12345"), CodeCheck::Expired),
        (("h1", "+100", "00000"), CodeCheck::Invalid),
        (("h1", "+999", "12345"), CodeCheck::Invalid),
        (("h1", "+100", "12345"), CodeCheck::Valid),
        // Used up.
        (("h1", "+100", "12345"), CodeCheck::Expired),
    ];
    for ((hash, phone, code), expected) in checks {
        assert_eq!(
            accounts::check_login_code(pool, hash, phone, code).await?,
            expected,
            "{hash} {phone} {code}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_login_code_wears_out_after_five_wrong_guesses() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    accounts::insert_login_code(pool, "h", "+100", "12345", 60).await?;
    for _ in 0..5 {
        assert_eq!(
            accounts::check_login_code(pool, "h", "+100", "11111").await?,
            CodeCheck::Invalid
        );
    }
    assert_eq!(
        accounts::check_login_code(pool, "h", "+100", "12345").await?,
        CodeCheck::Expired
    );
    Ok(())
}

#[tokio::test]
async fn authorizations_list_and_sign_out_only_the_owners_devices() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    let alice = accounts::insert_user(pool, "+100", "Alice")
        .await?
        .context("a new phone")?;
    let bob = accounts::insert_user(pool, "+200", "Bob")
        .await?
        .context("a new phone")?;
    for (key, model, user) in [
        (3, "tablet", alice.id),
        (1, "phone", alice.id),
        (2, "pc", bob.id),
    ] {
        assert!(accounts::insert_auth_key(pool, key, b"h", model).await?);
        accounts::bind_auth_key(pool, key, Some(user)).await?;
    }
    assert!(accounts::insert_auth_key(pool, 4, b"h", "unbound").await?);

    let listed = accounts::authorizations(pool, alice.id).await?;
    let keys: Vec<(i64, &str)> = listed
        .iter()
        .map(|a| (a.auth_key_id, a.device_model.as_str()))
        .collect();
    assert_eq!(keys, vec![(1, "phone"), (3, "tablet")]);
    let now = chrono_now();
    for a in &listed {
        assert!((now - 60..=now + 60).contains(&a.created_at), "{a:?}");
        assert!(a.bound_at >= a.created_at, "{a:?}");
    }

    // Bob's device is not Alice's to sign out.
    assert!(!accounts::unbind_if_owned(pool, 2, alice.id).await?);
    assert!(accounts::unbind_if_owned(pool, 3, alice.id).await?);
    assert!(!accounts::unbind_if_owned(pool, 3, alice.id).await?);

    let mut bound = accounts::bindings(pool, &[1, 2, 3, 4, 5]).await?;
    bound.sort_unstable();
    assert_eq!(
        bound,
        vec![(1, Some(alice.id)), (2, Some(bob.id)), (3, None), (4, None)]
    );
    Ok(())
}

#[tokio::test]
async fn every_other_device_of_a_user_is_signed_out_at_once() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    let alice = accounts::insert_user(pool, "+100", "Alice")
        .await?
        .context("a new phone")?;
    let bob = accounts::insert_user(pool, "+200", "Bob")
        .await?
        .context("a new phone")?;
    let devices = [
        (1, Some(alice.id)),
        (2, Some(alice.id)),
        (3, Some(alice.id)),
        (4, Some(bob.id)),
        (5, None),
    ];
    for (key, user) in devices {
        assert!(accounts::insert_auth_key(pool, key, b"h", "device").await?);
        accounts::bind_auth_key(pool, key, user).await?;
    }

    let mut ended = accounts::unbind_others(pool, alice.id, 2).await?;
    ended.sort_unstable();
    assert_eq!(ended, vec![1, 3]);
    // Again: nothing left to end but the kept key, which stays.
    assert!(accounts::unbind_others(pool, alice.id, 2).await?.is_empty());
    let mut bound = accounts::bindings(pool, &[1, 2, 3, 4, 5]).await?;
    bound.sort_unstable();
    assert_eq!(
        bound,
        vec![
            (1, None),
            (2, Some(alice.id)),
            (3, None),
            (4, Some(bob.id)),
            (5, None)
        ]
    );
    Ok(())
}

#[tokio::test]
async fn acknowledged_pts_only_moves_forward_per_device_and_user() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    assert_eq!(accounts::acked_pts(pool, 1, 10).await?, 0);
    // (auth key, user, pts acknowledged) -> stored
    let acks = [
        ((1, 10, 5), 5),
        ((1, 10, 3), 5),
        ((1, 10, 9), 9),
        // Another account on the same key starts fresh.
        ((1, 11, 2), 2),
        ((2, 10, 1), 1),
    ];
    for ((key, user, pts), stored) in acks {
        assert_eq!(accounts::ack_pts(pool, key, user, pts).await?, stored);
    }
    assert_eq!(accounts::acked_pts(pool, 1, 10).await?, 9);
    assert_eq!(accounts::acked_pts(pool, 1, 11).await?, 2);
    assert_eq!(accounts::acked_pts(pool, 2, 10).await?, 1);
    Ok(())
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

mod people_store {
    use anyhow::Context;
    use svc_gateway::{
        accounts,
        people::{self, ContactName},
        privacy::{Key, Rule, Value},
    };

    use super::schema;

    fn contact(id: i64, first: &str, last: &str) -> ContactName {
        ContactName {
            contact_user_id: id,
            first_name: first.into(),
            last_name: last.into(),
        }
    }

    #[tokio::test]
    async fn usernames_are_unique_whatever_their_case() -> anyhow::Result<()> {
        let db = schema().await?;
        let pool = &db.pool;
        let ann = accounts::insert_user(pool, "100", "Ann")
            .await?
            .context("new")?;
        let bob = accounts::insert_user(pool, "200", "Bob")
            .await?
            .context("new")?;
        let mut tx = pool.begin().await?;
        let mut p = people::lock_profile(&mut tx, ann.id)
            .await?
            .context("ann")?;
        p.username = Some("Ann_K".into());
        p.last_name = "Karlsson".into();
        p.about = "maps".into();
        p.photo_file_id = 42;
        assert!(people::save_profile(&mut tx, &p).await?);
        tx.commit().await?;
        assert_eq!(
            people::profile_by_username(pool, "ann_k").await?,
            Some(p.clone())
        );
        assert_eq!(
            people::profile_by_username(pool, "ANN_K").await?,
            Some(p.clone())
        );
        assert_eq!(people::profile_by_username(pool, "nobody").await?, None);
        // Bob cannot take it in another case; his transaction is refused.
        let mut tx = pool.begin().await?;
        let mut b = people::lock_profile(&mut tx, bob.id)
            .await?
            .context("bob")?;
        b.username = Some("ANN_k".into());
        assert!(!people::save_profile(&mut tx, &b).await?);
        drop(tx);
        assert_eq!(
            accounts::profiles_by_ids(pool, &[bob.id]).await?[0].username,
            None
        );
        Ok(())
    }

    #[tokio::test]
    async fn privacy_rules_replace_and_default() -> anyhow::Result<()> {
        let db = schema().await?;
        let pool = &db.pool;
        let ann = accounts::insert_user(pool, "100", "Ann")
            .await?
            .context("new")?;
        let rules = people::privacy_rules(pool, &[ann.id], &Key::ALL).await?;
        for key in Key::ALL {
            assert_eq!(rules.of(ann.id, key), Rule::default_for(key));
        }
        let nobody_but = Rule {
            key: Key::PhoneNumber,
            value: Value::Nobody,
            allow: vec![7, 9],
            deny: vec![],
        };
        let mut tx = pool.begin().await?;
        people::set_privacy_rule(&mut tx, ann.id, &Rule::default_for(Key::PhoneNumber)).await?;
        people::set_privacy_rule(&mut tx, ann.id, &nobody_but).await?;
        tx.commit().await?;
        let rules = people::privacy_rules(pool, &[ann.id], &[Key::PhoneNumber]).await?;
        assert_eq!(rules.of(ann.id, Key::PhoneNumber), nobody_but);
        // A key not asked for reads as its default.
        let others = people::privacy_rules(pool, &[ann.id], &[Key::LastSeen]).await?;
        assert_eq!(
            others.of(ann.id, Key::PhoneNumber),
            Rule::default_for(Key::PhoneNumber)
        );
        Ok(())
    }

    #[tokio::test]
    async fn contacts_are_added_renamed_listed_and_deleted() -> anyhow::Result<()> {
        let db = schema().await?;
        let pool = &db.pool;
        let mut ids = vec![];
        for (phone, name) in [("100", "Ann"), ("200", "Bob"), ("300", "Cat")] {
            ids.push(
                accounts::insert_user(pool, phone, name)
                    .await?
                    .context("new")?
                    .id,
            );
        }
        let (ann, bob, cat) = (ids[0], ids[1], ids[2]);
        assert_eq!(
            people::users_by_phones(pool, &["200".into(), "999".into()]).await?,
            [(bob, "200".to_owned())]
        );
        let mut tx = pool.begin().await?;
        // Bob given twice: the last names count.
        let added = people::upsert_contacts(
            &mut tx,
            ann,
            &[
                contact(bob, "B", ""),
                contact(cat, "Cat", "C"),
                contact(bob, "Bobby", ""),
            ],
        )
        .await?;
        tx.commit().await?;
        assert_eq!(added, [contact(bob, "Bobby", ""), contact(cat, "Cat", "C")]);
        let summary = people::contacts_summary(pool, ann).await?;
        assert_eq!((summary.count, summary.version), (2, 1));
        assert_eq!(summary.ids, [bob, cat]);
        // The same names again change nothing, not even the version.
        let mut tx = pool.begin().await?;
        let same = people::upsert_contacts(&mut tx, ann, &[contact(bob, "Bobby", "")]).await?;
        tx.commit().await?;
        assert!(same.is_empty());
        assert_eq!(people::contacts_summary(pool, ann).await?, summary);
        // Pages by id.
        assert_eq!(people::contacts_page(pool, ann, 0, 1).await?, [bob]);
        assert_eq!(people::contacts_page(pool, ann, bob, 10).await?, [cat]);
        assert!(people::contacts_page(pool, ann, cat, 10).await?.is_empty());
        // As Ann finds them: her names; Bob keeps her once he imports her.
        let mut tx = pool.begin().await?;
        people::upsert_contacts(&mut tx, bob, &[contact(ann, "Annie", "")]).await?;
        tx.commit().await?;
        let found = people::profiles_for_viewer(pool, ann, &[cat, bob, 999]).await?;
        let seen: Vec<_> = found
            .iter()
            .map(|f| {
                (
                    f.found.profile.id,
                    f.found.contact_first_name.as_deref(),
                    f.found.keeps_viewer,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [(bob, Some("Bobby"), true), (cat, Some("Cat"), false)]
        );
        assert_eq!(people::kept_by(pool, ann, &[bob, cat]).await?, [bob]);
        // Bob keeping her changes what she sees of him (a mutual contact, his phone): her
        // hash moves though her list did not.
        let kept = people::contacts_summary(pool, ann).await?;
        assert_eq!((kept.count, kept.version), (summary.count, summary.version));
        assert_ne!(kept.hash(&[]), summary.hash(&[]));
        // So do his rules as they name her, but not a rule no contact list shows.
        for (rule, moves) in [
            (
                Rule {
                    key: Key::FindByPhone,
                    value: Value::Nobody,
                    allow: vec![],
                    deny: vec![],
                },
                false,
            ),
            (
                Rule {
                    key: Key::ProfilePhoto,
                    value: Value::Everybody,
                    allow: vec![],
                    deny: vec![cat],
                },
                true,
            ),
            (
                Rule {
                    key: Key::ProfilePhoto,
                    value: Value::Everybody,
                    allow: vec![],
                    deny: vec![cat, ann],
                },
                true,
            ),
            (
                Rule {
                    key: Key::LastSeen,
                    value: Value::Contacts,
                    allow: vec![],
                    deny: vec![],
                },
                true,
            ),
        ] {
            let was = people::contacts_summary(pool, ann).await?;
            let mut tx = pool.begin().await?;
            people::set_privacy_rule(&mut tx, bob, &rule).await?;
            tx.commit().await?;
            let now = people::contacts_summary(pool, ann).await?;
            assert_eq!(now.hash(&[]) != was.hash(&[]), moves, "{rule:?}");
        }
        // And whom of them blocked her.
        assert_ne!(kept.hash(&[bob]), kept.hash(&[]));
        assert_eq!(kept.hash(&[bob, bob]), kept.hash(&[bob]));
        // A contact's own profile change moves her hash, not her list's version.
        let before = people::contacts_summary(pool, ann).await?;
        let mut tx = pool.begin().await?;
        let mut b = people::lock_profile(&mut tx, bob)
            .await?
            .ok_or_else(|| anyhow::anyhow!("Bob"))?;
        b.username = Some("bob_the_first".into());
        assert!(people::save_profile(&mut tx, &b).await?);
        tx.commit().await?;
        let moved = people::contacts_summary(pool, ann).await?;
        assert_eq!((moved.count, moved.version), (before.count, before.version));
        assert_ne!(moved.hash(&[]), before.hash(&[]));
        // Who keeps Ann, and Ann as each of them finds her.
        assert_eq!(people::keepers_of(pool, ann, 10).await?, [bob]);
        let mut seen: Vec<_> = people::profile_for_viewers(pool, ann, &[bob, cat, 999])
            .await?
            .into_iter()
            .map(|f| {
                (
                    f.viewer_id,
                    f.found.contact_first_name,
                    f.found.keeps_viewer,
                )
            })
            .collect();
        seen.sort_unstable();
        let mut expected = vec![
            (bob, Some("Annie".to_owned()), true),
            (cat, None, true),
            (999, None, false),
        ];
        expected.sort_unstable();
        assert_eq!(seen, expected);
        // Deleted: only those she had.
        let mut tx = pool.begin().await?;
        let deleted = people::delete_contacts(&mut tx, ann, &[cat, 999]).await?;
        tx.commit().await?;
        assert_eq!(deleted, [cat]);
        let after = people::contacts_summary(pool, ann).await?;
        assert_eq!((after.count, after.version), (1, 2));
        assert_ne!(after.hash(&[]), summary.hash(&[]));
        let cat_now = people::profiles_for_viewer(pool, ann, &[cat]).await?;
        assert_eq!(cat_now[0].found.contact_first_name, None);
        Ok(())
    }
}

#[tokio::test]
async fn last_seen_is_kept_per_user_and_never_moves_back() -> anyhow::Result<()> {
    let db = schema().await?;
    let pool = &db.pool;
    let alice = accounts::insert_user(pool, "+300", "Alice")
        .await?
        .context("a new phone")?;
    let bob = accounts::insert_user(pool, "+400", "Bob")
        .await?
        .context("a new phone")?;
    assert!(last_seen::of(pool, &[alice.id, bob.id]).await?.is_empty());
    last_seen::record(pool, alice.id, 1_700_000_000_000).await?;
    last_seen::record(pool, alice.id, 1_700_000_050_900).await?;
    // An earlier time (a late writer) changes nothing.
    last_seen::record(pool, alice.id, 1_600_000_000_000).await?;
    last_seen::record(pool, bob.id, 1_650_000_000_000).await?;
    let seen = last_seen::of(pool, &[alice.id, bob.id, 999]).await?;
    assert_eq!(seen.len(), 2);
    assert_eq!(seen.get(&alice.id), Some(&1_700_000_050));
    assert_eq!(seen.get(&bob.id), Some(&1_650_000_000));
    // The users' rows as a viewer finds them carry the same last seen.
    let carol = accounts::insert_user(pool, "+500", "Carol")
        .await?
        .context("a new phone")?;
    let found = people::profiles_for_viewer(pool, bob.id, &[alice.id, bob.id, carol.id]).await?;
    let carried: Vec<_> = found
        .iter()
        .map(|f| (f.found.profile.id, f.was_online))
        .collect();
    assert_eq!(
        carried,
        [
            (alice.id, Some(1_700_000_050)),
            (bob.id, Some(1_650_000_000)),
            (carol.id, None)
        ]
    );
    Ok(())
}

/// Two instances on one database: a change through either is loaded by both, bans since
/// the last load are reported once, and an unchanged version costs no reload.
#[tokio::test]
async fn limit_rules_and_bans_reach_every_instance_that_reloads() -> anyhow::Result<()> {
    use std::time::Duration;
    use svc_gateway::rules::{self, LiveRules, Override};

    let db = schema().await?;
    let pool = &db.pool;
    let (one, two) = (LiveRules::default(), LiveRules::default());
    assert_eq!(one.reload(pool).await?, Vec::<i64>::new());
    assert_eq!(two.reload(pool).await?, Vec::<i64>::new());
    assert_eq!(one.override_of("send"), None);

    rules::set_override(pool, "send", 3, 10).await?;
    assert!(rules::ban(pool, 42, "spam").await?);
    assert!(!rules::ban(pool, 42, "again").await?, "banned once");
    assert!(rules::ban(pool, 7, "").await?);
    for instance in [&one, &two] {
        let mut banned = instance.reload(pool).await?;
        banned.sort();
        assert_eq!(banned, vec![7, 42]);
        assert_eq!(
            instance.override_of("send"),
            Some(Override {
                limit: 3,
                period: Duration::from_secs(10)
            })
        );
        assert!(instance.is_banned(42) && instance.is_banned(7) && !instance.is_banned(8));
    }
    // Nothing changed: nothing newly banned, nothing reloaded.
    assert_eq!(one.reload(pool).await?, Vec::<i64>::new());

    rules::set_override(pool, "send", 0, 60).await?;
    assert!(rules::unban(pool, 42).await?);
    assert!(!rules::unban(pool, 42).await?, "not banned any more");
    rules::clear_override(pool, "lookup").await?;
    assert_eq!(two.reload(pool).await?, Vec::<i64>::new());
    assert!(!two.is_banned(42) && two.is_banned(7));
    assert_eq!(two.override_of("send").map(|o| o.limit), Some(0));
    rules::clear_override(pool, "send").await?;
    two.reload(pool).await?;
    assert_eq!(two.override_of("send"), None);

    let page = rules::bans_page(pool, 0, 10).await?;
    assert_eq!(page.iter().map(|b| b.user_id).collect::<Vec<_>>(), vec![7]);
    assert!(rules::bans_page(pool, 7, 10).await?.is_empty());
    Ok(())
}
