//! oxictl's library side: a device's saved identity and the client that signs every call with
//! its auth key, shared by the CLI, the load harness and the test suites.

pub mod device;
