//! Starts (or finds) the local PostgreSQL and Redis and prints their URLs.
//!
//! `cargo run -p oxigram-devinfra --example up -- [DATA_DIR] [--stop]`
//!
//! With `--stop`, stops them again if this run started them.

use std::process::ExitCode;

use oxigram_devinfra::{InfraOptions, LocalInfra};

fn main() -> ExitCode {
    let mut opts = InfraOptions::default();
    let mut stop = false;
    for arg in std::env::args().skip(1) {
        if arg == "--stop" {
            stop = true;
        } else {
            opts.data_dir = arg.into();
        }
    }
    let result = LocalInfra::ensure_running(&opts).and_then(|infra| {
        println!("DATABASE_URL={}", infra.database_url);
        println!("REDIS_URL={}", infra.redis_url);
        println!("started_here={}", infra.started_here());
        if stop { infra.stop() } else { Ok(()) }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("oxigram: {e}");
            ExitCode::FAILURE
        }
    }
}
