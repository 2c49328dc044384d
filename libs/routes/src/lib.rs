//! Online device routes: which gateway instance holds the update stream of which device.
//!
//! Routes live in Redis and only there, because they can be rebuilt: a gateway re-registers
//! every open stream on its refresh tick, and an entry expires when its gateway stops
//! refreshing it. Each user has one hash, `{prefix}routes:{user_id}`, mapping an auth key id to
//! `{epoch}|{push endpoint}`. The epoch grows with every (re)connection of the device, so a
//! gateway that lost the device never removes the route a newer connection wrote.
//!
//! Redis may lose the table (a restart keeps nothing, FLUSHALL empties it). Two keys make the
//! loss visible at once instead of at the next refresh:
//! - each gateway instance writes its marker `{prefix}gateway:{push endpoint}` with every full
//!   registration of its streams ([`Routes::register_all`]), and checks a few times a second
//!   that it is still there ([`Routes::marker_present`]); a missing marker means its routes
//!   went with it, and it registers them all again in one round trip;
//! - every full registration also writes `{prefix}routes:live`. While it is missing, no gateway
//!   has rebuilt its part of the table since it was lost, so a user without routes is not known
//!   to be offline: [`Lookup::complete`] is false and dispatch keeps the job for its retry.
//!
//! When Redis is down, lookups fail and pushes wait for the relay's retry; sending goes on, and
//! the gateways' streams pull their users' logs meanwhile.
//! No call waits on Redis longer than its budget, and a Redis that keeps failing is not
//! called at all until it answers a probe ([`RedisHandle`]).

mod handle;

use std::{collections::HashMap, time::Duration};

pub use handle::{RedisBudget, RedisHandle};

/// Most routes [`Routes::register_all`] sends in one round trip: a gateway's streams in one
/// pipeline, unless there are so many that one reply could outlast the call's timeout.
pub const ROUTES_PER_ROUND_TRIP: usize = 5_000;

/// One online device of a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub auth_key_id: i64,
    pub epoch: u64,
    pub push_endpoint: String,
}

/// The route table as the gateways write it: a route lives `ttl` unless refreshed.
#[derive(Clone)]
pub struct Routes {
    redis: RedisHandle,
    keys: Keys,
    ttl: Duration,
}

/// The route table as dispatch reads it. Only the gateways write it ([`Routes`]), so a reader
/// needs no route lifetime.
#[derive(Clone)]
pub struct RouteLookup {
    redis: RedisHandle,
    keys: Keys,
}

/// The names of the table's keys, under one installation's prefix.
#[derive(Clone)]
struct Keys {
    prefix: String,
}

impl Keys {
    fn user(&self, user_id: i64) -> String {
        format!("{}routes:{user_id}", self.prefix)
    }

    fn marker(&self, push_endpoint: &str) -> String {
        format!("{}gateway:{push_endpoint}", self.prefix)
    }

    fn live(&self) -> String {
        format!("{}routes:live", self.prefix)
    }
}

/// The routes of a lookup's users, and whether their absence means anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lookup {
    pub routes: HashMap<i64, Vec<Route>>,
    /// False while the table is lost and not yet rebuilt (see the crate's doc): a user
    /// without routes may then have an online device whose route is still to come.
    pub complete: bool,
}

const UNREGISTER: &str = r"
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0";

impl Routes {
    /// No connection is made until the first call, so a Redis outage never blocks start-up.
    pub fn new(redis: RedisHandle, prefix: &str, ttl: Duration) -> Self {
        Self {
            redis,
            keys: Keys {
                prefix: prefix.to_owned(),
            },
            ttl,
        }
    }

    fn ttl_secs(&self) -> u64 {
        self.ttl.as_secs().max(1)
    }

    /// Registers (or refreshes) a device's route and extends the user's entry's lifetime.
    pub async fn register(&self, user_id: i64, route: &Route) -> redis::RedisResult<()> {
        let key = self.keys.user(user_id);
        let value = format!("{}|{}", route.epoch, route.push_endpoint);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset(&key, route.auth_key_id, value)
            .ignore()
            .expire(&key, self.ttl_secs() as i64)
            .ignore();
        self.redis.query(&pipe).await
    }

    /// Registers every open stream of the gateway instance at `push_endpoint`, pipelined (one
    /// round trip for up to [`ROUTES_PER_ROUND_TRIP`] routes), then its marker and the table's
    /// `live` key: last, so a registration cut short leaves the marker missing and the next
    /// check registers again.
    pub async fn register_all(
        &self,
        push_endpoint: &str,
        routes: &[(i64, Route)],
    ) -> redis::RedisResult<()> {
        let ttl = self.ttl_secs();
        let mut chunks = routes.chunks(ROUTES_PER_ROUND_TRIP).peekable();
        loop {
            let chunk = chunks.next().unwrap_or_default();
            let mut pipe = redis::pipe();
            for (user_id, route) in chunk {
                let key = self.keys.user(*user_id);
                let value = format!("{}|{}", route.epoch, route.push_endpoint);
                pipe.hset(&key, route.auth_key_id, value)
                    .ignore()
                    .expire(&key, ttl as i64)
                    .ignore();
            }
            if chunks.peek().is_none() {
                pipe.set_ex(self.keys.marker(push_endpoint), 1, ttl)
                    .ignore()
                    .set_ex(self.keys.live(), 1, ttl)
                    .ignore();
                return self.redis.query(&pipe).await;
            }
            self.redis.query::<()>(&pipe).await?;
        }
    }

    /// Whether the marker of the instance at `push_endpoint` is still there: false after
    /// Redis lost its keys (restart, FLUSHALL) or the marker expired.
    pub async fn marker_present(&self, push_endpoint: &str) -> redis::RedisResult<bool> {
        let mut pipe = redis::pipe();
        pipe.exists(self.keys.marker(push_endpoint));
        let (present,): (bool,) = self.redis.query(&pipe).await?;
        Ok(present)
    }

    /// Removes a device's route, unless a newer connection replaced it meanwhile.
    pub async fn unregister(&self, user_id: i64, route: &Route) -> redis::RedisResult<()> {
        let value = format!("{}|{}", route.epoch, route.push_endpoint);
        let script = redis::Script::new(UNREGISTER);
        let mut invocation = script.key(self.keys.user(user_id));
        invocation.arg(route.auth_key_id).arg(value);
        self.redis.invoke::<i64>(&invocation).await?;
        Ok(())
    }
}

impl RouteLookup {
    /// No connection is made until the first call.
    pub fn new(redis: RedisHandle, prefix: &str) -> Self {
        Self {
            redis,
            keys: Keys {
                prefix: prefix.to_owned(),
            },
        }
    }

    /// The online devices of several users, and whether the table is whole, in one pipelined
    /// round trip.
    pub async fn lookup_many(&self, user_ids: &[i64]) -> redis::RedisResult<Lookup> {
        let mut users = user_ids.to_vec();
        users.sort_unstable();
        users.dedup();
        let mut pipe = redis::pipe();
        for user in &users {
            pipe.hgetall(self.keys.user(*user));
        }
        pipe.exists(self.keys.live());
        let mut values: Vec<redis::Value> = self.redis.query(&pipe).await?;
        let live = match values.pop() {
            Some(value) => redis::from_redis_value::<bool>(value)?,
            None => false,
        };
        let answers = values
            .into_iter()
            .map(redis::from_redis_value::<HashMap<i64, String>>)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Lookup {
            routes: users
                .into_iter()
                .zip(answers.into_iter().map(parse))
                .collect(),
            complete: live,
        })
    }
}

fn parse(entries: HashMap<i64, String>) -> Vec<Route> {
    entries
        .into_iter()
        .filter_map(|(auth_key_id, value)| {
            let (epoch, endpoint) = value.split_once('|')?;
            Some(Route {
                auth_key_id,
                epoch: epoch.parse().ok()?,
                push_endpoint: endpoint.to_owned(),
            })
        })
        .collect()
}
