//! MTProto 2.0, both sides, without any knowledge of oxigram's services: the TCP transports
//! (`transport`), the cryptography (`crypto`, `rsa_key`), auth key creation (`handshake`), the
//! encrypted message envelope (`envelope`), the binding message of a temporary key (`bind`), a
//! server session (`session`) that answers the service messages itself and hands every API call
//! to a [`session::Backend`], the answers a session's connection could not deliver (`parked`),
//! the TCP server loop (`server`) and a small client (`client`) used by tests and benchmarks.

pub mod bind;
pub mod client;
pub mod crypto;
pub mod envelope;
pub mod handshake;
pub mod parked;
pub mod rsa_key;
pub mod server;
pub mod session;
pub mod transport;
pub mod wire;

pub use crypto::AuthKey;
pub use rsa_key::ServerKey;
