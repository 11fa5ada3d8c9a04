//! The engines a client runs programs on: their connections, what each can
//! run, how many programs each has in flight, and their return after an
//! outage. One concern: which engine a program goes to, and when an engine
//! may be used again.
//!
//! A program (its compile and every case) runs on one engine. An engine
//! that stops answering is marked down; a background probe pings it with
//! backoff, and when it answers again it first removes what this client
//! left on it (every container labelled with this owner that no call is
//! using), then takes programs again.
//!
//! What is where: the pool's state (`engines`), connecting to an engine
//! (`connect`), the first contact and an engine's return (`recovery`),
//! a program's place (`capacity`), the checks that every engine runs a
//! profile alike (`preflight`), and the sweep of what is left
//! (`leftovers`).

mod capacity;
mod connect;
mod engines;
mod leftovers;
mod preflight;
mod recovery;

pub(crate) use capacity::{Lease, NoEngine};
pub(crate) use engines::{Pool, PooledEngine};
