//! `oxigram migrate`: migrates the chosen services' schemas and exits, for a deployment that
//! runs migrations as a step of its own (the chart's pre-install/pre-upgrade Jobs) before
//! the new version starts. Services still migrate at start; with nothing left to apply,
//! that is a no-op.

use oxigram_kit::{Config, startup::migrate_only};

use crate::Target;

/// Migrates each target's schema in turn (the migration lock is per database).
pub async fn run(config: &Config, targets: &[Target]) -> anyhow::Result<()> {
    let s = &config.services;
    for &target in targets {
        let outcome = match target {
            Target::Gateway => {
                migrate_only(
                    config,
                    &s.gateway,
                    svc_gateway::SCHEMA,
                    &svc_gateway::MIGRATOR,
                )
                .await
            }
            Target::Messages => {
                migrate_only(
                    config,
                    &s.messages,
                    svc_messages::SCHEMA,
                    &svc_messages::MIGRATOR,
                )
                .await
            }
            Target::Updates => {
                migrate_only(
                    config,
                    &s.updates,
                    svc_updates::SCHEMA,
                    &svc_updates::MIGRATOR,
                )
                .await
            }
            Target::Dialogs => {
                migrate_only(
                    config,
                    &s.dialogs,
                    svc_dialogs::SCHEMA,
                    &svc_dialogs::MIGRATOR,
                )
                .await
            }
            Target::Dispatch => {
                migrate_only(
                    config,
                    &s.dispatch,
                    svc_dispatch::SCHEMA,
                    &svc_dispatch::MIGRATOR,
                )
                .await
            }
            Target::Media => {
                migrate_only(config, &s.media, svc_media::SCHEMA, &svc_media::MIGRATOR).await
            }
        };
        outcome.map_err(|e| e.context(format!("migrating {} failed", target.name())))?;
        tracing::info!(service = target.name(), "schema migrated");
    }
    Ok(())
}
