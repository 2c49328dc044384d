//! `oxigram serve --target …` and `oxigram up`.

use std::{path::PathBuf, sync::Arc};

use clap::{Parser, Subcommand};
use oxigram::{Target, UpOptions};
use oxigram_kit::Config;

/// Requests and events are allocated and freed by the thousand a second (protobuf messages,
/// HTTP/2 frames, rows): glibc's malloc and free were about a sixth of this process's CPU
/// under load, more than any function of ours.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "oxigram",
    version,
    about = "A Telegram-class messaging backend"
)]
struct Cli {
    /// TOML config file (defaults, then this file, then OXIGRAM_* env).
    #[arg(long, global = true, env = "OXIGRAM_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the chosen services in this process.
    Serve {
        /// `all`, or a comma-separated list of gateway, messages, updates, dialogs, dispatch, media.
        #[arg(long, default_value = "all")]
        target: String,
    },
    /// Runs the whole system on this machine, with a private Postgres and Redis.
    Up {
        #[arg(long, default_value = ".oxigram")]
        data_dir: PathBuf,
        /// Never run apt-get; fail when Postgres or Redis is missing.
        #[arg(long)]
        no_install: bool,
    },
    /// Migrates the chosen services' schemas, then exits.
    Migrate {
        /// `all`, or a comma-separated list of gateway, messages, updates, dialogs, dispatch, media.
        #[arg(long, default_value = "all")]
        target: String,
    },
    /// Exits 0 when the service at `endpoint` reports SERVING on its gRPC health service
    /// (the chart's probe where the cluster cannot probe gRPC), 1 otherwise.
    Health {
        #[arg(long, default_value = "http://127.0.0.1:7710")]
        endpoint: String,
        /// The health service's service name; empty for the whole server.
        #[arg(long, default_value = "")]
        service: String,
        #[arg(long, default_value_t = 3000)]
        timeout_ms: u64,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::Health {
        endpoint,
        service,
        timeout_ms,
    } = &cli.command
    {
        // A probe: no configuration, no telemetry, one line of output.
        let timeout = std::time::Duration::from_millis(*timeout_ms);
        match oxigram::health::check(endpoint, service, timeout).await {
            Ok(oxigram::health::ServingStatus::Serving) => {
                println!("SERVING");
                return Ok(());
            }
            Ok(status) => println!("{}", status.as_str_name()),
            Err(err) => println!("{endpoint}: {err:#}"),
        }
        std::process::exit(1);
    }
    let mut config = Config::load(cli.config.as_deref())?;
    if matches!(cli.command, Command::Up { .. })
        && std::env::var_os("OXIGRAM_TELEMETRY__LOG_FORMAT").is_none()
    {
        config.telemetry.log_format = "text".into();
    }
    let service_name = match &cli.command {
        Command::Serve { target } | Command::Migrate { target } => {
            oxigram::service_name(&Target::parse_list(target)?)
        }
        Command::Up { .. } | Command::Health { .. } => oxigram::service_name(&Target::ALL),
    };
    let _telemetry = oxigram_telemetry::init(&service_name, &config.telemetry)?;
    let shutdown = oxigram_kit::shutdown_on_signals();
    match cli.command {
        Command::Serve { target } => {
            let targets = Target::parse_list(&target)?;
            oxigram::run(Arc::new(config), &targets, shutdown).await
        }
        Command::Health { .. } => Ok(()),
        Command::Migrate { target } => {
            let targets = Target::parse_list(&target)?;
            oxigram::migrate::run(&config, &targets).await
        }
        Command::Up {
            data_dir,
            no_install,
        } => {
            let options = UpOptions {
                data_dir,
                install_missing: !no_install,
            };
            oxigram::up(config, options, shutdown).await
        }
    }
}
