//! What every request passes through before a dialect sees it: the token
//! check ([`auth`]), body limits and the shared body budget ([`body`],
//! [`body_limits`], [`hold`]), connections and slow clients
//! ([`connections`]), who may reach the server ([`exposure`]), request
//! logging ([`observe`]), and what it publishes: `/metrics` ([`metrics`]),
//! `/openapi.json` ([`openapi`]); errors as answers ([`error`]).

pub(crate) mod auth;
pub(crate) mod body;
pub(crate) mod body_limits;
pub(crate) mod connections;
pub(crate) mod error;
pub(crate) mod exposure;
pub(crate) mod hold;
pub(crate) mod metrics;
pub(crate) mod observe;
pub(crate) mod openapi;
