//! The progscore binary, end to end, against the real engine.

mod run;
mod score;
mod signals;
