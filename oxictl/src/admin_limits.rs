//! `oxictl admin limits`: the gateway's run-time rate-limit overrides and ban list
//! (`oxigram.admin.v1.LimitsAdmin`), which every gateway instance applies within its
//! `[limits] reload_ms`.

use std::io::Write;

use clap::Subcommand;
use oxigram_proto::admin::v1::{
    BanRequest, ClearLimitRequest, LimitRule, ListBansRequest, ListLimitsRequest, SetLimitRequest,
    UnbanRequest, limits_admin_client::LimitsAdminClient,
};

use crate::admin::Admin;

#[derive(Subcommand)]
pub enum LimitsCommand {
    /// Every rule: its configured limit and the one in force.
    List,
    /// Overrides a rule's limit (0 refuses every call of it).
    Set {
        rule: String,
        limit: u32,
        /// The rule's period in seconds (default: the configured one).
        #[arg(long, default_value_t = 0)]
        period_secs: u32,
    },
    /// Goes back to the configured limit.
    Clear { rule: String },
    /// Bans a user: her calls are refused, her streams end.
    Ban {
        user_id: i64,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Lifts a ban.
    Unban { user_id: i64 },
    /// Every banned user, by id.
    Bans,
}

pub async fn run(
    admin: &Admin,
    command: LimitsCommand,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut client = LimitsAdminClient::new(admin.channel());
    let rules = match command {
        LimitsCommand::List => {
            client
                .list_limits(admin.request(ListLimitsRequest {}))
                .await
        }
        LimitsCommand::Set {
            rule,
            limit,
            period_secs,
        } => {
            let request = SetLimitRequest {
                rule,
                limit,
                period_secs,
            };
            client.set_limit(admin.request(request)).await
        }
        LimitsCommand::Clear { rule } => {
            client
                .clear_limit(admin.request(ClearLimitRequest { rule }))
                .await
        }
        LimitsCommand::Ban { user_id, reason } => {
            let request = admin.request(BanRequest { user_id, reason });
            let done = client.ban(request).await.map_err(|s| admin.refused(s))?;
            let how = if done.into_inner().changed {
                "banned"
            } else {
                "was banned already"
            };
            writeln!(out, "user {user_id} {how}")?;
            return Ok(());
        }
        LimitsCommand::Unban { user_id } => {
            let request = admin.request(UnbanRequest { user_id });
            let done = client.unban(request).await.map_err(|s| admin.refused(s))?;
            let how = if done.into_inner().changed {
                "unbanned"
            } else {
                "was not banned"
            };
            writeln!(out, "user {user_id} {how}")?;
            return Ok(());
        }
        LimitsCommand::Bans => {
            let mut after_user_id = 0;
            writeln!(out, "{:>12}  {:>12}  reason", "user", "banned at")?;
            loop {
                let request = admin.request(ListBansRequest {
                    after_user_id,
                    limit: 1000,
                });
                let page = client
                    .list_bans(request)
                    .await
                    .map_err(|s| admin.refused(s))?
                    .into_inner();
                for ban in &page.bans {
                    writeln!(
                        out,
                        "{:>12}  {:>12}  {}",
                        ban.user_id, ban.banned_at, ban.reason
                    )?;
                }
                if page.next_after_user_id == 0 {
                    return Ok(());
                }
                after_user_id = page.next_after_user_id;
            }
        }
    };
    let rules = rules.map_err(|s| admin.refused(s))?.into_inner().rules;
    write!(out, "{}", rules_table(&rules))?;
    Ok(())
}

/// One line per rule: what is configured, what is in force, and whether an override is.
fn rules_table(rules: &[LimitRule]) -> String {
    let mut table = format!(
        "{:<20} {:>16} {:>16}  overridden\n",
        "rule", "configured", "in force"
    );
    for r in rules {
        let per = |limit: u32, secs: u32| format!("{limit}/{secs}s");
        table.push_str(&format!(
            "{:<20} {:>16} {:>16}  {}\n",
            r.rule,
            per(r.configured_limit, r.configured_period_secs),
            per(r.limit, r.period_secs),
            if r.overridden { "yes" } else { "no" }
        ));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_table_shows_configured_and_in_force() {
        let rules = [
            LimitRule {
                rule: "send".into(),
                configured_limit: 30,
                configured_period_secs: 60,
                limit: 0,
                period_secs: 30,
                overridden: true,
            },
            LimitRule {
                rule: "lookup".into(),
                configured_limit: 100,
                configured_period_secs: 60,
                limit: 100,
                period_secs: 60,
                overridden: false,
            },
        ];
        let table = rules_table(&rules);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("send") && lines[1].contains("30/60s"));
        assert!(lines[1].contains("0/30s") && lines[1].ends_with("yes"));
        assert!(lines[2].starts_with("lookup") && lines[2].ends_with("no"));
    }
}
