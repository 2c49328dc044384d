//! The oxigram launcher: runs any set of the six services in one process (each on its own
//! port for other processes; among themselves their calls stay in-process, see
//! `oxigram_kit::local`), and `up`, which also brings a private Postgres and Redis for a
//! newcomer's machine.

pub mod health;
pub mod migrate;
pub mod smoke;

use std::{path::PathBuf, str::FromStr, sync::Arc};

use oxigram_kit::Config;
use tokio_util::sync::CancellationToken;

/// One of the six services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Gateway,
    Messages,
    Updates,
    Dialogs,
    Dispatch,
    Media,
}

impl Target {
    pub const ALL: [Target; 6] = [
        Target::Messages,
        Target::Updates,
        Target::Dialogs,
        Target::Dispatch,
        Target::Media,
        Target::Gateway,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::Gateway => "gateway",
            Target::Messages => "messages",
            Target::Updates => "updates",
            Target::Dialogs => "dialogs",
            Target::Dispatch => "dispatch",
            Target::Media => "media",
        }
    }

    /// Parses `all` or a comma-separated list such as `messages,updates`.
    pub fn parse_list(list: &str) -> anyhow::Result<Vec<Target>> {
        let mut targets = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if name == "all" {
                targets.extend(Target::ALL);
            } else {
                targets.push(name.parse()?);
            }
        }
        targets.dedup();
        anyhow::ensure!(!targets.is_empty(), "no target given");
        Ok(targets)
    }
}

impl FromStr for Target {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| anyhow::anyhow!("unknown target {s:?}; expected all, gateway, messages, updates, dialogs, dispatch or media"))
    }
}

/// The OpenTelemetry `service.name` of a process running `targets`: `oxigram-<service>` for a
/// process of one service, so a tracing backend tells the services apart; `oxigram` for one
/// running several, whose spans a backend can tell apart only by their names.
pub fn service_name(targets: &[Target]) -> String {
    match targets {
        [one] => format!("oxigram-{}", one.name()),
        _ => "oxigram".to_owned(),
    }
}

/// Runs `targets` until `shutdown`; if one fails, the others are stopped too.
pub async fn run(
    config: Arc<Config>,
    targets: &[Target],
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    oxigram_kit::balance::set_discovery(config.balancing.discovery());
    let mut tasks = tokio::task::JoinSet::new();
    if let Some(addr) = config.metrics_addr {
        let stop = shutdown.clone();
        tasks.spawn(async move {
            oxigram_telemetry::metrics::serve(addr, async move { stop.cancelled().await }).await
        });
    }
    for &target in targets {
        let (config, shutdown) = (config.clone(), shutdown.clone());
        tasks.spawn(async move {
            let outcome = match target {
                Target::Gateway => svc_gateway::run(config, shutdown).await,
                Target::Messages => svc_messages::run(config, shutdown).await,
                Target::Updates => svc_updates::run(config, shutdown).await,
                Target::Dialogs => svc_dialogs::run(config, shutdown).await,
                Target::Dispatch => svc_dispatch::run(config, shutdown).await,
                Target::Media => svc_media::run(config, shutdown).await,
            };
            outcome.map_err(|e| e.context(format!("service {} failed", target.name())))
        });
    }
    let mut first_error = None;
    while let Some(done) = tasks.join_next().await {
        let outcome = done.map_err(anyhow::Error::from).and_then(|r| r);
        if let Err(err) = outcome {
            tracing::error!(error = format!("{err:#}"), "stopping every service");
            shutdown.cancel();
            first_error.get_or_insert(err);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Options of `oxigram up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub data_dir: PathBuf,
    pub install_missing: bool,
}

/// `oxigram up`: starts (installing when missing) a private Postgres and Redis under the data
/// folder unless the config names them, runs every service, prints the gateway's address, and
/// on shutdown stops what it started.
pub async fn up(
    mut config: Config,
    options: UpOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut infra = None;
    if config.database_url.is_none() || config.redis_url.is_none() {
        let infra_options = oxigram_devinfra::InfraOptions {
            data_dir: options.data_dir.clone(),
            install_missing: options.install_missing,
            ..Default::default()
        };
        let local = tokio::task::spawn_blocking(move || {
            oxigram_devinfra::LocalInfra::ensure_running(&infra_options)
        })
        .await??;
        config
            .database_url
            .get_or_insert_with(|| local.database_url.clone());
        config
            .redis_url
            .get_or_insert_with(|| local.redis_url.clone());
        infra = Some(local);
    }
    if config.media.blob_dir == oxigram_kit::config::MediaConfig::default().blob_dir {
        config.media.blob_dir = options.data_dir.join("media").display().to_string();
    }
    if config.mtproto.rsa_key_file.is_none() {
        let key = mtproto_key(&options.data_dir)?;
        config.mtproto.rsa_key_file = Some(key.display().to_string());
        config
            .mtproto
            .listen
            .get_or_insert_with(|| std::net::SocketAddr::from(([127, 0, 0, 1], 7443)));
    }
    if let (Some(listen), Some(key)) = (config.mtproto.listen, &config.mtproto.rsa_key_file) {
        let fingerprint = svc_gateway::mtproto::load_key(key)?.fingerprint();
        // The door would refuse to open on an address clients cannot be told: say so now.
        let at = svc_gateway::mtproto::advertised(&config.mtproto, listen)
            .map_err(anyhow::Error::msg)?;
        println!(
            "mtproto: {listen}, clients connect to {}:{} (RSA key {key}, fingerprint {fingerprint})",
            at.host, at.port
        );
    }
    let config = Arc::new(config);
    let gateway = config.services.gateway.endpoint.clone();
    let announce = {
        let shutdown = shutdown.clone();
        async move {
            if oxigram_kit::wait_serving("gateway", &gateway, &shutdown)
                .await
                .is_ok()
            {
                println!("gateway: {gateway}");
            }
            anyhow::Ok(())
        }
    };
    let outcome = tokio::try_join!(run(config, &Target::ALL, shutdown), announce).map(|_| ());
    if let Some(local) = infra {
        if local.started_here() {
            eprintln!("oxigram: stopping Postgres and Redis");
        }
        tokio::task::spawn_blocking(move || local.stop()).await??;
    }
    outcome
}

/// The MTProto door's RSA key in the data folder, made on first start (with its public half
/// beside it, the PEM clients are given).
fn mtproto_key(data_dir: &std::path::Path) -> anyhow::Result<PathBuf> {
    let private = data_dir.join("mtproto_rsa.pem");
    if private.exists() {
        return Ok(private);
    }
    std::fs::create_dir_all(data_dir)?;
    let key = oxigram_mtproto::ServerKey::generate()?;
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    std::io::Write::write_all(&mut file.open(&private)?, key.private_pem()?.as_bytes())?;
    std::fs::write(data_dir.join("mtproto_rsa.pub.pem"), key.public_pem()?)?;
    Ok(private)
}
