//! `oxigram smoke` (the chart's `helm test`) against a running system: it passes with the
//! gateway's login code and fails, saying why, with another.

use std::process::Output;

use oxigram_kit::Config;
use oxigram_tests::{LOGIN_CODE, Mode, System, oxigram_command};

/// Runs `oxigram smoke` off the runtime's threads, which serve the system meanwhile.
async fn smoke(config: &Config, gateway: String, code: &'static str) -> anyhow::Result<Output> {
    let mut command = oxigram_command(config)?;
    command.args(["smoke", "--gateway", &gateway, "--login-code", code]);
    Ok(tokio::task::spawn_blocking(move || command.output()).await??)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_signs_up_and_sends_through_the_gateway() -> anyhow::Result<()> {
    let system = System::start(Mode::OneProcess).await?;
    let passed = smoke(&system.config, system.gateway(), LOGIN_CODE).await?;
    assert!(
        passed.status.success(),
        "smoke failed: {}",
        String::from_utf8_lossy(&passed.stderr)
    );

    let refused = smoke(&system.config, system.gateway(), "00000").await?;
    assert!(
        !refused.status.success(),
        "a wrong login code fails the smoke test"
    );
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("sign-up refused"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    Ok(())
}
