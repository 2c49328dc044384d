//! Postgres and Redis containers for one test, from images built on this machine
//! (`scripts/build-images`): testcontainers finds them locally and never pulls.

use anyhow::Context;
use testcontainers_modules::{
    postgres::Postgres,
    redis::Redis,
    testcontainers::{ContainerAsync, ImageExt, runners::AsyncRunner},
};

/// The local images (name, tag).
pub const POSTGRES_IMAGE: (&str, &str) = ("oxigram-postgres", "local");
pub const REDIS_IMAGE: (&str, &str) = ("oxigram-redis", "local");

pub(crate) struct Pair {
    pub postgres_url: String,
    pub redis_url: String,
    _postgres: ContainerAsync<Postgres>,
    _redis: ContainerAsync<Redis>,
}

pub(crate) async fn start() -> anyhow::Result<Pair> {
    let hint = "build the images first: scripts/build-images";
    let (postgres, redis) = tokio::try_join!(
        async {
            Postgres::default()
                .with_name(POSTGRES_IMAGE.0)
                .with_tag(POSTGRES_IMAGE.1)
                .with_cmd(["postgres", "-c", "max_connections=300", "-c", "fsync=off"])
                .start()
                .await
                .with_context(|| {
                    format!(
                        "cannot start {}:{} ({hint})",
                        POSTGRES_IMAGE.0, POSTGRES_IMAGE.1
                    )
                })
        },
        async {
            Redis::default()
                .with_name(REDIS_IMAGE.0)
                .with_tag(REDIS_IMAGE.1)
                .start()
                .await
                .with_context(|| {
                    format!("cannot start {}:{} ({hint})", REDIS_IMAGE.0, REDIS_IMAGE.1)
                })
        },
    )?;
    let pg_port = postgres.get_host_port_ipv4(5432).await?;
    let redis_port = redis.get_host_port_ipv4(6379).await?;
    eprintln!(
        "infra: postgres container {} from {}:{} on 127.0.0.1:{pg_port}; redis container {} from {}:{} on 127.0.0.1:{redis_port}",
        &postgres.id()[..12],
        POSTGRES_IMAGE.0,
        POSTGRES_IMAGE.1,
        &redis.id()[..12],
        REDIS_IMAGE.0,
        REDIS_IMAGE.1,
    );
    Ok(Pair {
        postgres_url: format!("postgres://postgres:postgres@127.0.0.1:{pg_port}/postgres"),
        redis_url: format!("redis://127.0.0.1:{redis_port}"),
        _postgres: postgres,
        _redis: redis,
    })
}
