//! The operator's run-time rules: rate-limit overrides and the ban list. Both live in the
//! gateway's database, so every instance sees the same rules; each instance keeps them in
//! memory (a check costs no round trip) and reloads them when the rules' version row moves,
//! which it polls every `[limits] reload_ms` — one single-row read — and which the instance
//! that changed them reloads at once.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        RwLock,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// Bans read per statement while reloading the list.
const BANS_PAGE: i64 = 10_000;

/// An operator's replacement for one rule's configured limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Override {
    pub limit: u32,
    pub period: Duration,
}

/// The rules as this instance last loaded them.
#[derive(Default)]
pub struct LiveRules {
    /// The version loaded; 0 before the first load.
    version: AtomicI64,
    overrides: RwLock<HashMap<String, Override>>,
    bans: RwLock<HashSet<i64>>,
}

impl LiveRules {
    pub fn is_banned(&self, user_id: i64) -> bool {
        self.bans.read().is_ok_and(|bans| bans.contains(&user_id))
    }

    pub fn override_of(&self, rule: &str) -> Option<Override> {
        self.overrides.read().ok()?.get(rule).copied()
    }

    /// Loads the rules if their version moved since the last load; returns the users banned
    /// since then (whose streams must end).
    pub async fn reload(&self, pool: &PgPool) -> Result<Vec<i64>, sqlx::Error> {
        // The version is read before the rules: a change made while they load moves it
        // again, and the next check loads once more.
        let version = current_version(pool).await?;
        if version == self.version.load(Ordering::Acquire) {
            return Ok(Vec::new());
        }
        let overrides: HashMap<String, Override> = load_overrides(pool)
            .await?
            .into_iter()
            .map(|row| {
                let rule = Override {
                    limit: row.limit_per_period.max(0) as u32,
                    period: Duration::from_secs(row.period_secs.max(1) as u64),
                };
                (row.rule, rule)
            })
            .collect();
        let mut bans = HashSet::new();
        let mut after = 0;
        loop {
            let page = bans_page(pool, after, BANS_PAGE).await?;
            let Some(last) = page.last() else { break };
            after = last.user_id;
            let full = page.len() as i64 == BANS_PAGE;
            bans.extend(page.into_iter().map(|b| b.user_id));
            if !full {
                break;
            }
        }
        let newly_banned = match self.bans.write() {
            Ok(mut current) => {
                let newly: Vec<i64> = bans.difference(&current).copied().collect();
                *current = bans;
                newly
            }
            Err(_) => Vec::new(),
        };
        if let Ok(mut current) = self.overrides.write() {
            *current = overrides;
        }
        self.version.store(version, Ordering::Release);
        Ok(newly_banned)
    }
}

/// Reloads `rules` every `every` until `shutdown`, handing each newly banned user to
/// `banned`. A failed reload keeps the rules last loaded and is logged once per run of
/// failures.
pub async fn reload_periodically(
    pool: &PgPool,
    rules: &LiveRules,
    every: Duration,
    shutdown: &CancellationToken,
    banned: impl Fn(i64),
) {
    let mut ticks = tokio::time::interval(every.max(Duration::from_millis(100)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        match rules.reload(pool).await {
            Ok(newly_banned) => {
                if failing {
                    tracing::info!("limit rules and ban list reload again");
                }
                failing = false;
                newly_banned.into_iter().for_each(&banned);
            }
            Err(error) => {
                if !failing {
                    tracing::warn!(%error, "cannot reload the limit rules and ban list; keeping the last loaded");
                }
                failing = true;
            }
        }
    }
}

#[derive(Debug, sqlx::FromRow)]
pub struct OverrideRow {
    pub rule: String,
    pub limit_per_period: i32,
    pub period_secs: i32,
}

#[derive(Debug, sqlx::FromRow)]
pub struct BanRow {
    pub user_id: i64,
    pub reason: String,
    /// Unix seconds.
    pub banned_at: i64,
}

/// The rules' version (the singleton row's primary key).
pub async fn current_version(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT version FROM limit_rules_version WHERE singleton")
        .fetch_one(pool)
        .await
}

/// Every override: one per rule, a handful of rows.
pub async fn load_overrides(pool: &PgPool) -> Result<Vec<OverrideRow>, sqlx::Error> {
    sqlx::query_as("SELECT rule, limit_per_period, period_secs FROM limit_overrides")
        .fetch_all(pool)
        .await
}

/// Bans after `after_user_id` by ascending user id (the primary key's order).
pub async fn bans_page(
    pool: &PgPool,
    after_user_id: i64,
    limit: i64,
) -> Result<Vec<BanRow>, sqlx::Error> {
    sqlx::query_as(
        "SELECT user_id, reason, extract(epoch FROM banned_at)::bigint AS banned_at \
         FROM bans WHERE user_id > $1 ORDER BY user_id LIMIT $2",
    )
    .bind(after_user_id)
    .bind(limit)
    .fetch_all(pool)
    .await
}

pub async fn set_override(
    pool: &PgPool,
    rule: &str,
    limit: u32,
    period_secs: u32,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO limit_overrides (rule, limit_per_period, period_secs) VALUES ($1, $2, $3) \
         ON CONFLICT (rule) DO UPDATE SET limit_per_period = $2, period_secs = $3, updated_at = now()",
    )
    .bind(rule)
    .bind(limit.min(i32::MAX as u32) as i32)
    .bind(period_secs as i32)
    .execute(pool)
    .await
    .map(drop)
}

pub async fn clear_override(pool: &PgPool, rule: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM limit_overrides WHERE rule = $1")
        .bind(rule)
        .execute(pool)
        .await
        .map(drop)
}

/// Bans a user; `false` when she was banned already (the first reason stays).
pub async fn ban(pool: &PgPool, user_id: i64, reason: &str) -> Result<bool, sqlx::Error> {
    sqlx::query("INSERT INTO bans (user_id, reason) VALUES ($1, $2) ON CONFLICT DO NOTHING")
        .bind(user_id)
        .bind(reason)
        .execute(pool)
        .await
        .map(|done| done.rows_affected() == 1)
}

/// Lifts a ban; `false` when the user was not banned.
pub async fn unban(pool: &PgPool, user_id: i64) -> Result<bool, sqlx::Error> {
    sqlx::query("DELETE FROM bans WHERE user_id = $1")
        .bind(user_id)
        .execute(pool)
        .await
        .map(|done| done.rows_affected() == 1)
}
