//! The operator's `LimitsAdmin` API: run-time overrides of the gateway's rate limits and the
//! ban list (`rules.rs` keeps both). A change is written to the database, then this instance
//! reloads at once and ends a newly banned user's streams here; the other instances follow
//! within `[limits] reload_ms`.

use std::sync::Arc;

use oxigram_errors::{Error, ErrorCode, check_text, status};
use oxigram_limiter::Rule;
use oxigram_outbox::{AdminToken, MAX_ADMIN_IDS};
use oxigram_proto::admin::v1::{
    Ban, BanRequest, BanResponse, ClearLimitRequest, LimitRule, LimitRules, ListBansRequest,
    ListBansResponse, ListLimitsRequest, SetLimitRequest, UnbanRequest,
    limits_admin_server::LimitsAdmin,
};
use tonic::{Request, Response, Status};

use crate::{Gateway, rules};

/// Longest period a rule may have.
const MAX_PERIOD_SECS: u32 = 86_400;
/// Longest reason a ban may give.
const MAX_REASON_CHARS: usize = 256;

pub struct LimitsAdminApi {
    pub gateway: Arc<Gateway>,
    pub token: AdminToken,
}

impl LimitsAdminApi {
    fn configured_rule(&self, name: &str) -> Result<&Rule, Status> {
        check_text("rule", name)?;
        self.gateway.limits.rule_named(name).ok_or_else(|| {
            let names: Vec<&str> = self
                .gateway
                .limits
                .configured()
                .iter()
                .map(|r| r.name)
                .collect();
            status(
                ErrorCode::LimitRuleInvalid,
                &format!("no rule {name:?}; rules: {}", names.join(", ")),
            )
        })
    }

    /// Reloads this instance's rules at once, ending the streams of users just banned.
    async fn reload_here(&self) -> Result<(), Status> {
        let gateway = &self.gateway;
        let banned = gateway
            .rules
            .reload(&gateway.pool)
            .await
            .map_err(Error::from)?;
        banned
            .into_iter()
            .for_each(|user| gateway.hub.disconnect_user(user));
        Ok(())
    }

    /// Reloads, then answers every rule as now in force.
    async fn reloaded(&self) -> Result<LimitRules, Status> {
        self.reload_here().await?;
        let limits = &self.gateway.limits;
        let rules = limits
            .configured()
            .into_iter()
            .map(|configured| {
                let effective = limits.effective(configured);
                LimitRule {
                    rule: configured.name.to_owned(),
                    configured_limit: configured.limit,
                    configured_period_secs: configured.period.as_secs() as u32,
                    limit: effective.limit,
                    period_secs: effective.period.as_secs() as u32,
                    overridden: effective != *configured,
                }
            })
            .collect();
        Ok(LimitRules { rules })
    }
}

fn valid_user(user_id: i64) -> Result<i64, Status> {
    if user_id > 0 {
        Ok(user_id)
    } else {
        Err(status(ErrorCode::UserIdInvalid, "user_id must be positive"))
    }
}

#[tonic::async_trait]
impl LimitsAdmin for LimitsAdminApi {
    async fn set_limit(
        &self,
        request: Request<SetLimitRequest>,
    ) -> Result<Response<LimitRules>, Status> {
        self.token.authorise(&request)?;
        let r = request.into_inner();
        let configured = self.configured_rule(&r.rule)?;
        let period_secs = match r.period_secs {
            0 => configured.period.as_secs() as u32,
            p if p <= MAX_PERIOD_SECS => p,
            _ => {
                return Err(status(
                    ErrorCode::LimitRuleInvalid,
                    "period_secs is at most 86400 (a day)",
                ));
            }
        };
        rules::set_override(&self.gateway.pool, configured.name, r.limit, period_secs)
            .await
            .map_err(Error::from)?;
        tracing::info!(
            rule = configured.name,
            limit = r.limit,
            period_secs,
            "limit overridden by an operator"
        );
        Ok(Response::new(self.reloaded().await?))
    }

    async fn clear_limit(
        &self,
        request: Request<ClearLimitRequest>,
    ) -> Result<Response<LimitRules>, Status> {
        self.token.authorise(&request)?;
        let r = request.into_inner();
        let configured = self.configured_rule(&r.rule)?;
        rules::clear_override(&self.gateway.pool, configured.name)
            .await
            .map_err(Error::from)?;
        tracing::info!(
            rule = configured.name,
            "limit override cleared by an operator"
        );
        Ok(Response::new(self.reloaded().await?))
    }

    async fn list_limits(
        &self,
        request: Request<ListLimitsRequest>,
    ) -> Result<Response<LimitRules>, Status> {
        self.token.authorise(&request)?;
        Ok(Response::new(self.reloaded().await?))
    }

    async fn ban(&self, request: Request<BanRequest>) -> Result<Response<BanResponse>, Status> {
        self.token.authorise(&request)?;
        let r = request.into_inner();
        let user_id = valid_user(r.user_id)?;
        check_text("reason", &r.reason)?;
        if r.reason.chars().count() > MAX_REASON_CHARS {
            return Err(status(
                ErrorCode::InputTextInvalid,
                "reason is at most 256 characters",
            ));
        }
        let changed = rules::ban(&self.gateway.pool, user_id, &r.reason)
            .await
            .map_err(Error::from)?;
        tracing::info!(user_id, changed, "user banned by an operator");
        self.reload_here().await?;
        Ok(Response::new(BanResponse { changed }))
    }

    async fn unban(&self, request: Request<UnbanRequest>) -> Result<Response<BanResponse>, Status> {
        self.token.authorise(&request)?;
        let user_id = valid_user(request.into_inner().user_id)?;
        let changed = rules::unban(&self.gateway.pool, user_id)
            .await
            .map_err(Error::from)?;
        tracing::info!(user_id, changed, "ban lifted by an operator");
        self.reload_here().await?;
        Ok(Response::new(BanResponse { changed }))
    }

    async fn list_bans(
        &self,
        request: Request<ListBansRequest>,
    ) -> Result<Response<ListBansResponse>, Status> {
        self.token.authorise(&request)?;
        let r = request.into_inner();
        if r.after_user_id < 0 {
            return Err(status(
                ErrorCode::OffsetInvalid,
                "after_user_id must not be negative",
            ));
        }
        let limit = match r.limit {
            0 => 100,
            l if l > 0 && l as usize <= MAX_ADMIN_IDS => l,
            _ => return Err(status(ErrorCode::LimitInvalid, "limit is 0 to 1000")),
        };
        let page = rules::bans_page(&self.gateway.pool, r.after_user_id, i64::from(limit))
            .await
            .map_err(Error::from)?;
        let next_after_user_id = match page.last() {
            Some(last) if page.len() == limit as usize => last.user_id,
            _ => 0,
        };
        let bans = page
            .into_iter()
            .map(|b| Ban {
                user_id: b.user_id,
                reason: b.reason,
                banned_at: b.banned_at,
            })
            .collect();
        Ok(Response::new(ListBansResponse {
            bans,
            next_after_user_id,
        }))
    }
}
