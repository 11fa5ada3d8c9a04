//! progscore as a library: what every face (the `progscore` binary, the
//! Python package, the HTTP server) runs on. The typed configuration, the
//! sandbox backends behind one client, the WebAssembly comparators'
//! adapter, the session, batches, and the batch policy. No face is imported
//! here, and no face re-implements what is here.

pub mod backends;
pub mod batch;
pub mod batch_run;
pub mod comparators;
pub mod config;
pub mod policy;
pub mod remote;
pub mod results;
pub mod session;
