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

/// The longest single argument a program can be given, in bytes: Linux
/// refuses longer ones (`MAX_ARG_STRLEN`, 128 KiB with its terminating NUL).
pub const MAX_ARG_BYTES: usize = 128 * 1024 - 1;

/// The most bytes of arguments a program can be given, counting the profile's
/// command and the program's path too, each with its terminating NUL. Well
/// under Linux's `ARG_MAX` (2 MiB with the usual 8 MiB stack) so that the
/// environment and the runtime's own needs always fit beside it.
pub const MAX_ARGV_BYTES: usize = 1024 * 1024;

/// The most bytes of standard input one invocation can be given. Inputs are
/// kept in the evidence store with every observation.
pub const MAX_STDIN_BYTES: usize = 16 * 1024 * 1024;

/// Why an invocation cannot be delivered to a program as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {message}")]
pub struct InvocationError {
    /// The field at fault, relative to the invocation: `args[1]`, `args`, `stdin`.
    pub field: String,
    /// What is wrong and what the limit is.
    pub message: String,
}

/// The first invocation of a list that cannot be delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invocation {index}: {error}")]
pub struct InvalidInvocation {
    /// Which invocation, from 0.
    pub index: usize,
    /// What is wrong with it.
    #[source]
    pub error: InvocationError,
}

impl Invocation {
    /// Checks that the invocation can be delivered exactly as given after
    /// `command` (the profile's command and the program's path): no argument
    /// holds a NUL byte (the kernel would cut it there), and the arguments
    /// and stdin fit the documented sizes ([`MAX_ARG_BYTES`],
    /// [`MAX_ARGV_BYTES`], [`MAX_STDIN_BYTES`]). A program that cannot be
    /// given its input never ran, so nothing it did could be observed.
    pub fn check(&self, command: &[String]) -> Result<(), InvocationError> {
        for (index, arg) in self.args.iter().enumerate() {
            let field = || format!("args[{index}]");
            if let Some(at) = arg.bytes().position(|b| b == 0) {
                return Err(InvocationError {
                    field: field(),
                    message: format!(
                        "holds a NUL byte at offset {at}; a program's arguments are C strings \
                         and cannot carry one (pass such data on stdin)"
                    ),
                });
            }
            if arg.len() > MAX_ARG_BYTES {
                return Err(InvocationError {
                    field: field(),
                    message: format!(
                        "is {} bytes; one argument may hold at most {MAX_ARG_BYTES} bytes \
                         (pass larger data on stdin)",
                        arg.len()
                    ),
                });
            }
        }
        let argv_bytes: usize = command
            .iter()
            .chain(&self.args)
            .map(|word| word.len() + 1)
            .sum();
        if argv_bytes > MAX_ARGV_BYTES {
            return Err(InvocationError {
                field: "args".into(),
                message: format!(
                    "{} argument(s) take {argv_bytes} bytes with the profile's command; at most \
                     {MAX_ARGV_BYTES} bytes can be passed (pass larger data on stdin)",
                    self.args.len()
                ),
            });
        }
        if let Some(stdin) = &self.stdin
            && stdin.0.len() > MAX_STDIN_BYTES
        {
            return Err(InvocationError {
                field: "stdin".into(),
                message: format!(
                    "is {} bytes; at most {MAX_STDIN_BYTES} bytes of standard input can be given",
                    stdin.0.len()
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> Vec<String> {
        vec!["python3".into(), "-I".into(), "/sandbox/program".into()]
    }

    #[test]
    fn deliverable_invocations_pass() {
        let ok =
            Invocation::with_args(["3", "", &"x".repeat(MAX_ARG_BYTES)]).stdin(b"\0\xff".to_vec());
        assert_eq!(ok.check(&command()), Ok(()));
    }

    #[test]
    fn a_nul_byte_names_its_argument() {
        let err = Invocation::with_args(["a", "b\0c"])
            .check(&command())
            .unwrap_err();
        assert_eq!(err.field, "args[1]");
        assert!(err.message.contains("NUL byte at offset 1"), "{err}");
    }

    #[test]
    fn sizes_beyond_the_documented_limits_are_refused() {
        let long = Invocation::with_args(["x".repeat(MAX_ARG_BYTES + 1)]);
        assert_eq!(long.check(&command()).unwrap_err().field, "args[0]");
        let many = Invocation::with_args(vec!["y".repeat(1000); 5000]);
        let err = many.check(&command()).unwrap_err();
        assert_eq!(err.field, "args");
        assert!(err.message.contains("5000 argument(s)"), "{err}");
        let stdin = Invocation::default().stdin(vec![b'z'; MAX_STDIN_BYTES + 1]);
        assert_eq!(stdin.check(&command()).unwrap_err().field, "stdin");
    }
}
