//! progscore as a library: the typed configuration and the sandbox backends
//! behind one client. The binary (`main.rs`, `cli/`) is a thin layer on top.

pub mod backends;
pub mod batch;
pub mod comparators;
pub mod config;
pub mod session;
