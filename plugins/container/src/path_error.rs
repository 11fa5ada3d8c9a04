//! A host file or folder that a backend could not create, write, watch or
//! remove (cgroups, workspaces): which one, what was tried, and the
//! system's reason, typed so that a caller can tell a busy cgroup from
//! another failure without reading the message.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// See the module doc.
#[derive(Debug, Error)]
pub enum PathError {
    /// One operation on one path failed.
    #[error("cannot {action} {}: {cause}", path.display())]
    Io {
        /// What was tried ("remove cgroup", "write", ...).
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        cause: io::Error,
    },
    /// Several paths of one operation failed (each named).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<PathError>),
}

impl PathError {
    /// `action` on `path` failed with `source`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> PathError {
        PathError::Io {
            action,
            path: path.into(),
            cause: source,
        }
    }

    /// Every failure was the kernel's EBUSY (a cgroup whose tasks have
    /// not all exited yet): worth trying again in a moment.
    pub fn all_busy(&self) -> bool {
        match self {
            PathError::Io { cause: source, .. } => source.raw_os_error() == Some(libc::EBUSY),
            PathError::Several(errors) => errors.iter().all(PathError::all_busy),
        }
    }

    /// `Ok` when `errors` is empty, else one error naming them all.
    pub fn collect(mut errors: Vec<PathError>) -> Result<(), PathError> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(PathError::Several(errors)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(path: &str, errno: i32) -> PathError {
        PathError::io("remove cgroup", path, io::Error::from_raw_os_error(errno))
    }

    #[test]
    fn only_failures_that_are_all_ebusy_are_worth_trying_again() {
        assert!(PathError::collect(Vec::new()).is_ok());
        let busy = PathError::collect(vec![failed("/a", libc::EBUSY), failed("/b", libc::EBUSY)])
            .unwrap_err();
        assert!(busy.all_busy());
        let mixed = PathError::collect(vec![failed("/a", libc::EBUSY), failed("/b", libc::EACCES)])
            .unwrap_err();
        assert!(!mixed.all_busy());
        // Each path is named once, with what was tried and why.
        let text = mixed.to_string();
        assert!(text.starts_with("cannot remove cgroup /a: "), "{text}");
        assert!(text.contains("; cannot remove cgroup /b: "), "{text}");
    }
}
