//! The server kit every oxigram service is built with: layered configuration, a gRPC server
//! with health, reflection and trace propagation, client channels with deadlines (in-process
//! when the callee serves in the same process), and graceful shutdown on SIGTERM/SIGINT.

pub mod admission;
pub mod balance;
pub mod client;
pub mod config;
pub mod local;
pub mod rpc_metrics;
pub mod server;
pub mod shutdown;
pub mod startup;

pub use client::{GrpcChannel, channel, refused, wait_serving};
pub use config::{Config, ServiceAddr};
pub use server::{GrpcServer, Readiness};
pub use shutdown::shutdown_on_signals;
