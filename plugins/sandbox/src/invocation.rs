//! One run of a program: its arguments and standard input.

use serde::{Deserialize, Serialize};

use crate::bytes::ByteString;

/// One invocation of a program: the arguments after the program's path, and
/// its standard input (`None`: stdin is closed at once, like `< /dev/null`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invocation {
    /// Arguments passed after the program path, verbatim.
    #[serde(default)]
    pub args: Vec<String>,
    /// Standard input; `null` or absent means empty.
    #[serde(default)]
    pub stdin: Option<ByteString>,
}

impl Invocation {
    /// An invocation with these arguments and no stdin.
    pub fn with_args<I, S>(args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Invocation {
            args: args.into_iter().map(Into::into).collect(),
            stdin: None,
        }
    }

    /// Sets the standard input.
    pub fn stdin(mut self, stdin: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(ByteString(stdin.into()));
        self
    }
}
