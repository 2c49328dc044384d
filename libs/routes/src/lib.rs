//! Online device routes: which gateway instance holds the update stream of which device.
//!
//! Routes live in Redis and only there, because they can be rebuilt: a gateway re-registers
//! every open stream on its refresh tick, and an entry expires when its gateway stops
//! refreshing it. Each user has one hash, `{prefix}routes:{user_id}`, mapping an auth key id to
//! `{epoch}|{push endpoint}`. The epoch grows with every (re)connection of the device, so a
//! gateway that lost the device never removes the route a newer connection wrote.
//! When Redis is down, lookups fail and pushes wait for the relay's retry; sending goes on.

use std::{collections::HashMap, sync::Arc, time::Duration};

use redis::aio::ConnectionManager;
use tokio::sync::Mutex;

/// One online device of a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub auth_key_id: i64,
    pub epoch: u64,
    pub push_endpoint: String,
}

/// A Redis connection made on first use and re-made after failures, with short timeouts:
/// Redis is never worth blocking a request for.
#[derive(Clone)]
pub struct RedisHandle {
    client: redis::Client,
    conn: Arc<Mutex<Option<ConnectionManager>>>,
}

impl RedisHandle {
    pub fn new(url: &str) -> redis::RedisResult<Self> {
        Ok(Self {
            client: redis::Client::open(url)?,
            conn: Arc::new(Mutex::new(None)),
        })
    }

    pub async fn connection(&self) -> redis::RedisResult<ConnectionManager> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(Duration::from_secs(1)))
            .set_number_of_retries(1);
        let conn = ConnectionManager::new_with_config(self.client.clone(), config).await?;
        *slot = Some(conn.clone());
        Ok(conn)
    }
}

/// The route table, shared by the gateways (writers) and dispatch (reader).
#[derive(Clone)]
pub struct Routes {
    redis: RedisHandle,
    prefix: String,
    ttl: Duration,
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
            prefix: prefix.to_owned(),
            ttl,
        }
    }

    fn key(&self, user_id: i64) -> String {
        format!("{}routes:{user_id}", self.prefix)
    }

    async fn connection(&self) -> redis::RedisResult<ConnectionManager> {
        self.redis.connection().await
    }

    /// Registers (or refreshes) a device's route and extends the user's entry's lifetime.
    pub async fn register(&self, user_id: i64, route: &Route) -> redis::RedisResult<()> {
        let mut conn = self.connection().await?;
        let key = self.key(user_id);
        let value = format!("{}|{}", route.epoch, route.push_endpoint);
        redis::pipe()
            .atomic()
            .hset(&key, route.auth_key_id, value)
            .ignore()
            .expire(&key, self.ttl.as_secs() as i64)
            .ignore()
            .query_async::<()>(&mut conn)
            .await
    }

    /// Removes a device's route, unless a newer connection replaced it meanwhile.
    pub async fn unregister(&self, user_id: i64, route: &Route) -> redis::RedisResult<()> {
        let mut conn = self.connection().await?;
        let value = format!("{}|{}", route.epoch, route.push_endpoint);
        redis::Script::new(UNREGISTER)
            .key(self.key(user_id))
            .arg(route.auth_key_id)
            .arg(value)
            .invoke_async::<i64>(&mut conn)
            .await?;
        Ok(())
    }

    /// The online devices of several users, in one pipelined round trip.
    pub async fn lookup_many(
        &self,
        user_ids: &[i64],
    ) -> redis::RedisResult<HashMap<i64, Vec<Route>>> {
        let mut users = user_ids.to_vec();
        users.sort_unstable();
        users.dedup();
        let mut pipe = redis::pipe();
        for user in &users {
            pipe.hgetall(self.key(*user));
        }
        let mut conn = self.connection().await?;
        let answers: Vec<HashMap<i64, String>> = pipe.query_async(&mut conn).await?;
        Ok(users
            .into_iter()
            .zip(answers.into_iter().map(parse))
            .collect())
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
