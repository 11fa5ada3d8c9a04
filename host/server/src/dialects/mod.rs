//! The dialects the server speaks, one module each, over the one run path
//! in [`crate::jobs`]: progscore's own `/v1` (`native`), SandboxFusion,
//! Judge0 and Piston. They differ only in how requests and answers map.

pub(crate) mod judge0;
pub(crate) mod native;
pub(crate) mod piston;
pub(crate) mod sandbox_fusion;
