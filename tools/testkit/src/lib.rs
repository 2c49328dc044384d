//! Fixtures shared by oxigram's tests: where Postgres and Redis come from ([`infra`],
//! [`private_infra`]), a fresh database per test ([`fresh_database`]), and one service's
//! migrated schema for testing its store ([`store::migrated`]), and what the store
//! benchmarks share ([`bench`]).

pub mod bench;
mod containers;
mod infra;
pub mod s3;
pub mod store;

pub use infra::{Infra, free_port, fresh_database, infra, private_infra, unique_name};
