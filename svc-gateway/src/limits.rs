//! The gateway's rate limits (see `oxigram_limiter`): sends and lookups of other users per
//! user (resolving a phone or a username, each phone of a contact import, which would
//! otherwise let one account enumerate who uses the service), login codes and sign-in attempts
//! per phone and per auth key, getDifference calls and stream opens per device. Past a limit a
//! call answers FLOOD_WAIT_X; while Redis fails the calls go on, each instance enforcing its
//! share. An operator can override any rule's limit at run time (`rules.rs`, the admin API's
//! `LimitsAdmin`); a limit of 0 refuses every call of its rule.

use std::{fmt::Display, sync::Arc};

use oxigram_errors::{Error, ErrorCode};
use oxigram_kit::Config;
use oxigram_limiter::{Limiter, Rule};
use oxigram_routes::RedisHandle;
use tonic::Status;

use crate::rules::LiveRules;

/// Every rule, with the limits of the configuration.
pub struct Limits {
    limiter: Limiter,
    rules: Arc<LiveRules>,
    pub send: Rule,
    pub lookup: Rule,
    pub send_code_per_phone: Rule,
    pub sign_in_per_phone: Rule,
    pub login_per_key: Rule,
    pub difference_per_device: Rule,
    pub stream_opens_per_device: Rule,
    pub upload_parts_per_user: Rule,
}

impl Limits {
    pub fn new(redis: RedisHandle, config: &Config, rules: Arc<LiveRules>) -> Self {
        let l = &config.limits;
        Self {
            rules,
            limiter: Limiter::new(
                redis,
                &config.redis_key_prefix,
                "gateway",
                l.expected_instances,
            ),
            send: Rule::per_minute("send", config.gateway.sends_per_minute),
            lookup: Rule::per_minute("lookup", config.gateway.lookups_per_minute),
            send_code_per_phone: Rule::per_minute("send_code_phone", l.send_code_per_phone),
            sign_in_per_phone: Rule::per_minute("sign_in_phone", l.sign_in_per_phone),
            login_per_key: Rule::per_minute("login_key", l.login_per_key),
            difference_per_device: Rule::per_minute("difference_device", l.difference_per_device),
            stream_opens_per_device: Rule::per_minute(
                "stream_open_device",
                l.stream_opens_per_device,
            ),
            upload_parts_per_user: Rule::per_minute("upload_part_user", l.upload_parts_per_user),
        }
    }

    /// Every rule as configured, for the admin API.
    pub fn configured(&self) -> [&Rule; 8] {
        [
            &self.send,
            &self.lookup,
            &self.send_code_per_phone,
            &self.sign_in_per_phone,
            &self.login_per_key,
            &self.difference_per_device,
            &self.stream_opens_per_device,
            &self.upload_parts_per_user,
        ]
    }

    /// The configured rule called `name`.
    pub fn rule_named(&self, name: &str) -> Option<&Rule> {
        self.configured().into_iter().find(|r| r.name == name)
    }

    /// `rule` with the operator's override, if any, in place of its configured limit.
    pub fn effective(&self, rule: &Rule) -> Rule {
        match self.rules.override_of(rule.name) {
            Some(o) => Rule {
                name: rule.name,
                limit: o.limit,
                period: o.period,
            },
            None => *rule,
        }
    }

    /// One unit of `rule` for `key`, or `FLOOD_WAIT_X` saying `what`.
    pub async fn check(&self, rule: &Rule, key: impl Display, what: &str) -> Result<(), Status> {
        self.spend(rule, key, 1, what).await
    }

    /// `units` of `rule` for `key` (all or none), or `FLOOD_WAIT_X` saying `what`.
    pub async fn spend(
        &self,
        rule: &Rule,
        key: impl Display,
        units: u32,
        what: &str,
    ) -> Result<(), Status> {
        let rule = self.effective(rule);
        if rule.limit == 0 {
            let wait = rule.period.as_secs().clamp(1, u32::MAX as u64) as u32;
            return Err(Error::new(ErrorCode::FloodWait(wait), what).into());
        }
        match self.limiter.spend(&rule, &key.to_string(), units).await {
            Ok(()) => Ok(()),
            Err(wait) => Err(Error::new(ErrorCode::FloodWait(wait), what).into()),
        }
    }
}
