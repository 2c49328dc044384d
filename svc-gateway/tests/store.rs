//! The gateway's store (accounts, auth keys, login codes, device state) against its own
//! migrated schema.

use anyhow::Context;
use oxigram_testkit::store::{self, Migrated};
use svc_gateway::{
    accounts::{self, CodeCheck},
    last_seen,
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
    let found = accounts::users_by_ids(pool, &[bob.id, 999_999, alice.id]).await?;
    assert_eq!(found, vec![alice, bob]);
    assert!(accounts::users_by_ids(pool, &[]).await?.is_empty());
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
    Ok(())
}
