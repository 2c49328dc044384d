//! The limiter against a real Redis: instances share one bucket per key, and with Redis
//! unreachable each instance enforces its share of the limit.

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
