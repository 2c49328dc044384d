//! The limiter against a real Redis: instances share one bucket per key, a busy key is mostly
//! decided on the instance without breaking the shared limit, and with Redis unreachable each
//! instance enforces its share of the limit.

use std::time::Duration;

use oxigram_limiter::{Limiter, Rule};
use oxigram_routes::{RedisBudget, RedisHandle};
use oxigram_testkit::{infra, unique_name};

const RULE: Rule = Rule::per_minute("test", 3);

#[tokio::test]
async fn instances_share_one_bucket_per_key() -> anyhow::Result<()> {
    let infra = infra().await?;
    let prefix = format!("{}:", unique_name("limiter"));
    let handle = || RedisHandle::new(&infra.redis_url, RedisBudget::default(), "test");
    let (a, b) = (
        Limiter::new(handle()?, &prefix, "test", 1),
        Limiter::new(handle()?, &prefix, "test", 1),
    );
    // Three units between the two instances, then both refuse.
    assert_eq!(a.check(&RULE, "u1").await, Ok(()));
    assert_eq!(b.check(&RULE, "u1").await, Ok(()));
    assert_eq!(a.check(&RULE, "u1").await, Ok(()));
    let wait = b.check(&RULE, "u1").await.err();
    assert!(wait.is_some_and(|w| (1..=20).contains(&w)), "{wait:?}");
    assert!(a.check(&RULE, "u1").await.is_err());
    // Another key has its own bucket; more units than fit are refused whole.
    assert!(a.spend(&RULE, "u2", 4).await.is_err());
    assert_eq!(a.spend(&RULE, "u2", 3).await, Ok(()));
    // Both instances see each other.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while a.instances() < 2 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(a.instances(), 2);
    Ok(())
}

#[tokio::test]
async fn without_redis_each_instance_enforces_its_share() -> anyhow::Result<()> {
    // Nothing listens there.
    let dead = || RedisHandle::new("redis://127.0.0.1:1", RedisBudget::default(), "test");
    for (instances, share) in [(1, 3), (2, 2), (3, 1), (10, 1)] {
        let limiter = Limiter::new(dead()?, "p:", "test", instances);
        for _ in 0..share {
            assert_eq!(
                limiter.check(&RULE, "u").await,
                Ok(()),
                "{instances} instances"
            );
        }
        assert!(
            limiter.check(&RULE, "u").await.is_err(),
            "{instances} instances: a share of {share}"
        );
    }
    Ok(())
}

/// Checks of `rule` decided by `decided` so far in this process, refused or not.
fn checks(rule: &str, decided: &str) -> u64 {
    let labels = format!("{{rule=\"{rule}\",decided=\"{decided}\"}}");
    oxigram_telemetry::metrics::render()
        .lines()
        .find_map(|line| {
            line.strip_prefix("oxigram_rate_limit_checks_total")?
                .strip_prefix(&labels)
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_busy_key_is_mostly_decided_on_the_instance() -> anyhow::Result<()> {
    let infra = infra().await?;
    let prefix = format!("{}:", unique_name("limiter"));
    let limiter = Limiter::new(
        RedisHandle::new(&infra.redis_url, RedisBudget::default(), "test")?,
        &prefix,
        "test",
        1,
    );
    // 600 a minute on one instance: each call to Redis leases 60 more.
    let rule = Rule::per_minute("busy", 600);
    for i in 0..300 {
        assert_eq!(limiter.check(&rule, "u").await, Ok(()), "check {i}");
    }
    let (redis, local) = (checks("busy", "redis"), checks("busy", "local"));
    assert_eq!(redis + local, 300);
    assert!(redis <= 5, "{redis} of 300 checks asked Redis");

    // Another instance spent the whole limit: Redis refuses this one once, and the refusal
    // then stands here without asking again.
    let other = Limiter::new(
        RedisHandle::new(&infra.redis_url, RedisBudget::default(), "test")?,
        &prefix,
        "test",
        1,
    );
    let small = Rule {
        name: "refused",
        limit: 3,
        period: Duration::from_secs(3600),
    };
    assert_eq!(other.spend(&small, "u", 3).await, Ok(()));
    for _ in 0..10 {
        let wait = limiter.check(&small, "u").await.err();
        assert!(wait.is_some_and(|w| w > 1000), "{wait:?}");
    }
    assert_eq!(
        checks("refused", "redis"),
        2,
        "the other's grant and one refusal"
    );
    assert_eq!(checks("refused", "local"), 9);
    Ok(())
}

#[tokio::test]
async fn leases_never_take_instances_past_the_shared_limit() -> anyhow::Result<()> {
    let infra = infra().await?;
    let prefix = format!("{}:", unique_name("limiter"));
    let handle = || RedisHandle::new(&infra.redis_url, RedisBudget::default(), "test");
    let (a, b) = (
        Limiter::new(handle()?, &prefix, "test", 2),
        Limiter::new(handle()?, &prefix, "test", 2),
    );
    // A period long enough that nothing comes back during the test: leases of 100 / 2 / 10.
    let rule = Rule {
        name: "shared",
        limit: 100,
        period: Duration::from_secs(3600),
    };
    let mut granted = 0;
    for _ in 0..150 {
        for limiter in [&a, &b] {
            if limiter.check(&rule, "u").await.is_ok() {
                granted += 1;
            }
        }
    }
    // What one instance leased and did not grant is held back from the other, never more.
    assert!((90..=100).contains(&granted), "{granted} granted of 100");
    assert!(a.check(&rule, "u").await.is_err() && b.check(&rule, "u").await.is_err());
    Ok(())
}

#[tokio::test]
async fn concurrent_checks_of_one_key_lose_no_units() -> anyhow::Result<()> {
    use futures::StreamExt;
    let infra = infra().await?;
    let prefix = format!("{}:", unique_name("limiter"));
    let limiter = Limiter::new(
        RedisHandle::new(&infra.redis_url, RedisBudget::default(), "test")?,
        &prefix,
        "test",
        1,
    );
    // Sixteen checks at a time: many find no lease at once and each brings one back.
    let rule = Rule {
        name: "concurrent",
        limit: 1_000,
        period: Duration::from_secs(3600),
    };
    let granted = futures::stream::iter(0..1_000)
        .map(|_| limiter.check(&rule, "u"))
        .buffer_unordered(16)
        .filter(|verdict| std::future::ready(verdict.is_ok()))
        .count()
        .await;
    assert_eq!(granted, 1_000, "every unit of the limit granted");
    assert!(limiter.check(&rule, "u").await.is_err());
    Ok(())
}
