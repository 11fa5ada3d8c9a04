//! The compile step: a profile that builds the program once per call, in a
//! container of its own, before its cases run the result.

use serde::Serialize;

use super::{Limits, RuntimeProfile};

/// Where the program's file appears inside a container.
pub const SANDBOX_DIR: &str = "/sandbox";
/// The program's file name when the profile names none.
pub const DEFAULT_SOURCE: &str = "program";
/// The build folder: writable during the compile, read-only for the cases.
pub const BUILD_PATH: &str = "/build";

/// How a profile builds a program before its cases.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompileStep {
    /// The compiler's argv, run verbatim (no path is appended).
    pub command: Vec<String>,
    /// The compile's own limits.
    pub limits: Limits,
}

/// Which container of a call: the program's compile or one of its cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The compile, once per call.
    Compile,
    /// One invocation.
    Case,
}

impl RuntimeProfile {
    /// The program's file name in its folder: `source`, or the default.
    pub fn source_name(&self) -> &str {
        self.source.as_deref().unwrap_or(DEFAULT_SOURCE)
    }

    /// The program's path inside the sandbox: `/sandbox/<source>`.
    pub fn program_path(&self) -> String {
        format!("{SANDBOX_DIR}/{}", self.source_name())
    }

    /// The argv a container of `stage` runs. The compile runs its command
    /// verbatim; a case runs the profile's command, then the program's path
    /// when nothing was compiled, then the invocation's arguments.
    pub fn argv(&self, stage: Stage, args: &[String]) -> Vec<String> {
        match (stage, &self.compile) {
            (Stage::Compile, Some(compile)) => compile.command.clone(),
            (Stage::Compile, None) => Vec::new(),
            (Stage::Case, Some(_)) => self.command.iter().chain(args).cloned().collect(),
            (Stage::Case, None) => self
                .command
                .iter()
                .cloned()
                .chain([self.program_path()])
                .chain(args.iter().cloned())
                .collect(),
        }
    }

    /// The limits a container of `stage` runs under.
    pub fn limits_of(&self, stage: Stage) -> &Limits {
        match (stage, &self.compile) {
            (Stage::Compile, Some(compile)) => &compile.limits,
            _ => &self.limits,
        }
    }

    /// The numeric uid and gid the program (and its compile) run as; a user
    /// given as `UID` alone has the same gid.
    pub fn user_ids(&self) -> (u32, u32) {
        let user = self.user.as_deref().unwrap_or(super::DEFAULT_DOCKER_USER);
        let (uid, gid) = user.split_once(':').unwrap_or((user, user));
        (uid.parse().unwrap_or(65534), gid.parse().unwrap_or(65534))
    }

    /// Whether a container of `stage` gets the build folder, and writable:
    /// `None` for profiles that compile nothing.
    pub fn build_writable(&self, stage: Stage) -> Option<bool> {
        self.compile.as_ref().map(|_| stage == Stage::Compile)
    }
}

/// A plain file name: not empty, no `/`, not `.` or `..`, no NUL.
pub(super) fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}
