//! The private host folder that holds the program while it runs, and the
//! build folder of profiles that compile it.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use progscore_sandbox::{
    CompileEvent, InvocationEvent, Outcome, ProgramFiles, RuntimeProfile, SANDBOX_DIR, SandboxError,
};
use sha2::{Digest, Sha256};

use crate::path_error::PathError;

/// A 0700 folder holding the program file (0444). The container sees only
/// the file, bind-mounted read-only, so the folder can stay private to root.
/// A program with files gets a folder instead (`sandbox/`: the program and
/// its files, all read-only), mounted as the program's folder.
pub struct Workspace {
    dir: Option<tempfile::TempDir>,
    /// What is mounted read-only, and where in the container.
    program: PathBuf,
    program_target: String,
}

impl Workspace {
    /// A workspace in `root`, the client's private owner folder, for
    /// `program` (and its `files`) under `profile`.
    pub fn create(
        root: &Path,
        program: &[u8],
        profile: &RuntimeProfile,
        files: &ProgramFiles,
    ) -> std::io::Result<Workspace> {
        let dir = tempfile::Builder::new()
            .prefix("progscore-ws-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(root)?;
        if !files.is_empty() {
            let folder = dir.path().join("sandbox");
            std::fs::create_dir(&folder)?;
            files.write_with_program(profile, program, &folder)?;
            return Ok(Workspace {
                dir: Some(dir),
                program: folder,
                program_target: SANDBOX_DIR.to_string(),
            });
        }
        let program_path = dir.path().join("program");
        // No fsync: the container reads the file through the page cache at
        // once, and a workspace is worthless after a crash anyway.
        let mut file = std::fs::File::create(&program_path)?;
        file.write_all(program)?;
        drop(file);
        // World-readable so the container's non-root user can read it through
        // the bind mount; nobody can write it.
        std::fs::set_permissions(&program_path, std::fs::Permissions::from_mode(0o444))?;
        Ok(Workspace {
            dir: Some(dir),
            program: program_path,
            program_target: profile.program_path(),
        })
    }

    /// The program's file, or its folder when it brings files.
    pub fn program_path(&self) -> &Path {
        &self.program
    }

    /// Where [`Workspace::program_path`] is mounted (read-only) in the
    /// sandbox: the program's path, or the program's folder.
    pub fn program_target(&self) -> &str {
        &self.program_target
    }

    /// A fresh, empty build folder owned by `uid:gid` (the user the compile
    /// runs as), private to it: the compile's container gets it writable,
    /// the cases' containers read-only.
    pub fn create_build_dir(&self, uid: u32, gid: u32) -> std::io::Result<PathBuf> {
        let Some(dir) = &self.dir else {
            return Err(std::io::Error::other("the workspace was removed"));
        };
        let build = dir.path().join("build");
        std::fs::create_dir(&build)?;
        std::os::unix::fs::chown(&build, Some(uid), Some(gid))?;
        std::fs::set_permissions(&build, std::fs::Permissions::from_mode(0o700))?;
        Ok(build)
    }

    /// Removes the folder, reporting failure instead of swallowing it.
    pub fn remove(mut self) -> Result<(), PathError> {
        match self.dir.take() {
            Some(dir) => {
                let path = dir.path().to_path_buf();
                if self.program_target == SANDBOX_DIR {
                    // Read-only folders cannot be emptied by a user without
                    // CAP_DAC_OVERRIDE: writable again first.
                    writable_folders(&self.program);
                }
                dir.close()
                    .map_err(|e| PathError::io("remove workspace", path, e))
            }
            None => Ok(()),
        }
    }
}

/// Makes `folder` and the folders below it writable by their owner again.
fn writable_folders(folder: &Path) {
    let _ = std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(folder) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                writable_folders(&entry.path());
            }
        }
    }
}

impl Workspace {
    /// The build folder for `profile`'s compile, owned by the user it runs
    /// as; `None` when the profile compiles nothing. Refused (nothing runs)
    /// when the host's filesystem holding it is nearly full: a compiler
    /// failing on the host's disk must not look like the program's failure.
    pub fn build_dir_for(&self, profile: &RuntimeProfile) -> Result<Option<PathBuf>, SandboxError> {
        if profile.compile.is_none() {
            return Ok(None);
        }
        let Some(dir) = &self.dir else {
            return Err(SandboxError::Setup {
                message: "the workspace was removed".into(),
            });
        };
        match free_bytes(dir.path()) {
            Ok(free) if free >= BUILD_DISK_HEADROOM => {}
            Ok(free) => {
                return Err(SandboxError::Setup {
                    message: format!(
                        "the filesystem holding {} has {} bytes free; a compile needs at least {BUILD_DISK_HEADROOM}: free some space",
                        dir.path().display(),
                        free
                    ),
                });
            }
            Err(e) => {
                return Err(SandboxError::Setup {
                    message: format!(
                        "cannot tell the free space of {}: {e}",
                        dir.path().display()
                    ),
                });
            }
        }
        let (uid, gid) = profile.user_ids();
        self.create_build_dir(uid, gid)
            .map(Some)
            .map_err(|e| SandboxError::Setup {
                message: format!("cannot create the build folder: {e}"),
            })
    }
}

/// Free space the build folder's filesystem must have for a compile to
/// start, and below which a failed compile is not blamed on the program.
pub const BUILD_DISK_HEADROOM: u64 = 64 << 20;

/// Where a compile's build folder lives, for judging a compiler that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildDisk {
    /// This host's disk (the folder is bind-mounted): its free space is
    /// measured after a failed compile.
    Local,
    /// The disk of an engine elsewhere (the build is in a volume there, and
    /// comes back to be hashed): this host's free space says nothing about it.
    Remote,
}

/// The compile's record from its container's event: with the build folder's
/// hash when the compiler exited 0 (a folder that cannot be read makes the
/// compile a sandbox error: nothing is known about the program then).
pub fn compile_event(event: InvocationEvent, build_dir: &Path, disk: BuildDisk) -> CompileEvent {
    let compiler_failed = matches!(event.outcome, Outcome::Exited { exit_code } if exit_code != 0);
    // Only asked when it matters: after a compiler that failed.
    let room = compiler_failed.then(|| match disk {
        BuildDisk::Local => Room::Free(free_bytes(build_dir)),
        BuildDisk::Remote => Room::Unseen,
    });
    judge_compile(event, build_dir, room)
}

/// What is known of the build disk after a failed compiler.
enum Room {
    /// This host's free space on it.
    Free(std::io::Result<u64>),
    /// Nothing: the disk is an engine's elsewhere.
    Unseen,
}

/// What a compiler prints when its disk (or the user's quota on it) is
/// full, in any case: `gcc`/`ld`/`rustc` say "No space left on device",
/// `go` "no space left on device".
const DISK_FULL_WORDS: [&str; 2] = ["no space left on device", "disk quota exceeded"];

/// Why a failed compiler on an engine elsewhere may have failed on that
/// engine's disk: its output says so, or was cut short (the words may be
/// in what was dropped). `None`: its complete output says nothing of it.
fn remote_disk_doubt(event: &InvocationEvent) -> Option<&'static str> {
    let streams = [&event.stdout, &event.stderr];
    let says_full = streams.iter().any(|stream| {
        let text = String::from_utf8_lossy(&stream.data.0).to_lowercase();
        DISK_FULL_WORDS.iter().any(|words| text.contains(words))
    });
    if says_full {
        Some("its output says the disk is full")
    } else if streams.iter().any(|stream| stream.truncated) {
        Some("its output was cut short, so it may say the disk is full where it was dropped")
    } else {
        None
    }
}

/// [`compile_event`], given what is known of the build disk after a failed
/// compiler (`None` when the compiler did not fail).
fn judge_compile(
    mut event: InvocationEvent,
    build_dir: &Path,
    room_after_failure: Option<Room>,
) -> CompileEvent {
    let mut artifact_sha256 = None;
    // The bound the compile ran under (its limits are in its provenance).
    let build_limit = event.provenance.as_ref().and_then(|p| p.limits.build_bytes);
    let over_limit = match (&event.outcome, build_limit) {
        (Outcome::Exited { exit_code: 0 }, Some(limit)) => match build_size(build_dir, limit) {
            Ok(size) => (size > limit).then_some(limit),
            Err(e) => {
                event.outcome = Outcome::SandboxError {
                    message: format!("cannot read the build folder {}: {e}", build_dir.display()),
                };
                None
            }
        },
        _ => None,
    };
    if let Some(limit) = over_limit {
        // What the compile wrote, not the host: the same build is over
        // the same bound every time.
        event.outcome = Outcome::CompileError {
            reason: format!(
                "the build is larger than its limit of {limit} bytes (compile_limits.build counts every file's bytes and {BUILD_ENTRY_BYTES} per entry)"
            ),
        };
    }
    match (&event.outcome, room_after_failure) {
        (Outcome::Exited { exit_code: 0 }, _) => match tree_sha256(build_dir) {
            Ok(sha256) => artifact_sha256 = Some(sha256),
            Err(e) => {
                event.outcome = Outcome::SandboxError {
                    message: format!("cannot read the build folder {}: {e}", build_dir.display()),
                }
            }
        },
        // A linker that could not write its output to a full host disk
        // fails like a program that does not compile: undecided, then.
        (Outcome::Exited { exit_code }, Some(Room::Free(free))) => {
            let short = match free {
                Ok(free) if free >= BUILD_DISK_HEADROOM => None,
                Ok(free) => Some(format!("had {free} bytes free")),
                Err(e) => Some(format!("could not be checked ({e})")),
            };
            if let Some(short) = short {
                event.outcome = Outcome::SandboxError {
                    message: format!(
                        "the compiler exited with code {exit_code} while the host's filesystem holding the build folder {short}: the host, not the program, may have failed it"
                    ),
                };
            }
        }
        // An engine elsewhere: its disk cannot be measured from here, so
        // the compiler's own words (or their possible loss) decide.
        (Outcome::Exited { exit_code }, Some(Room::Unseen)) => {
            if let Some(doubt) = remote_disk_doubt(&event) {
                event.outcome = Outcome::SandboxError {
                    message: format!(
                        "the compiler exited with code {exit_code} on an engine elsewhere, whose disk this host cannot measure, and {doubt}: the engine, not the program, may have failed it"
                    ),
                };
            }
        }
        _ => {}
    }
    CompileEvent {
        event,
        artifact_sha256,
    }
}

/// Bytes a build folder entry counts for besides its file's bytes (a tar
/// header's), so that a flood of empty files or folders is bounded too.
pub const BUILD_ENTRY_BYTES: u64 = 512;

/// The size of the build folder at `root` as `compile_limits.build` bounds
/// it: every entry under it (not itself) counts [`BUILD_ENTRY_BYTES`], a
/// regular file its length besides (symlinks are not followed, hard links
/// count each time). Stops counting once past `stop_above`.
pub fn build_size(root: &Path, stop_above: u64) -> std::io::Result<u64> {
    let mut size = 0u64;
    let mut pending = vec![root.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let path = entry?.path();
            let meta = std::fs::symlink_metadata(&path)?;
            size = size.saturating_add(BUILD_ENTRY_BYTES);
            if meta.is_file() {
                size = size.saturating_add(meta.len());
            } else if meta.is_dir() {
                pending.push(path);
            }
            if size > stop_above {
                return Ok(size);
            }
        }
    }
    Ok(size)
}

/// Bytes an unprivileged writer may still use on the filesystem of `path`.
fn free_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `stat` is writable
    // memory of the right type; statvfs fills it on success.
    let stat = unsafe {
        if libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        stat.assume_init()
    };
    // Both are u64 on 64-bit targets only.
    #[allow(clippy::useless_conversion)]
    let free = u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize));
    Ok(free)
}

/// sha256 of a folder's contents: every entry, in path order, by relative
/// path, kind, permission bits and bytes (a symlink by its target). Two
/// builds hash equal exactly when they would run the same.
pub fn tree_sha256(root: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(&relative))?
            .map(|entry| entry.map(|e| relative.join(e.file_name())))
            .collect::<Result<_, _>>()?;
        entries.sort();
        // Visited in order: children pushed in reverse so the first pops first.
        let mut folders = Vec::new();
        for path in entries {
            let full = root.join(&path);
            let meta = std::fs::symlink_metadata(&full)?;
            let name = path.as_os_str().as_encoded_bytes();
            let mode = meta.mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&full)?;
                hasher.update(format!("l {mode:o} {}\0", name.len()));
                hasher.update(name);
                hasher.update(target.as_os_str().as_encoded_bytes());
            } else if meta.is_dir() {
                hasher.update(format!("d {mode:o} {}\0", name.len()));
                hasher.update(name);
                folders.push(path);
            } else if meta.is_file() {
                hasher.update(format!("f {mode:o} {} {}\0", name.len(), meta.len()));
                hasher.update(name);
                let mut file = std::fs::File::open(&full)?;
                std::io::copy(&mut file, &mut hasher)?;
            } else {
                // Sockets, fifos, devices: named, never read.
                hasher.update(format!("o {mode:o} {}\0", name.len()));
                hasher.update(name);
            }
        }
        pending.extend(folders.into_iter().rev());
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use progscore_sandbox::CapturedStream;

    fn failed_with(exit_code: i64) -> InvocationEvent {
        InvocationEvent {
            outcome: Outcome::Exited { exit_code },
            ..InvocationEvent::not_run("")
        }
    }

    #[test]
    fn a_compiler_failing_on_a_nearly_full_host_disk_is_not_the_programs_failure() {
        let build = tempfile::tempdir().unwrap();
        let ample = judge_compile(
            failed_with(1),
            build.path(),
            Some(Room::Free(Ok(BUILD_DISK_HEADROOM))),
        );
        assert_eq!(ample.event.outcome, Outcome::Exited { exit_code: 1 });
        let full = judge_compile(failed_with(1), build.path(), Some(Room::Free(Ok(8 << 20))));
        let Outcome::SandboxError { message } = &full.event.outcome else {
            panic!("{full:?}");
        };
        assert!(message.contains("8388608 bytes free"), "{message}");
        // The case events are then not_run: the verdict is undetermined.
        assert!(full.case_event().unwrap().outcome.is_unproven());
        let unknown = judge_compile(
            failed_with(1),
            build.path(),
            Some(Room::Free(Err(std::io::Error::other("gone")))),
        );
        assert!(matches!(
            unknown.event.outcome,
            Outcome::SandboxError { .. }
        ));
        // This machine's own temporary folder has room.
        assert!(free_bytes(build.path()).unwrap() > 0);
        let built = judge_compile(failed_with(0), build.path(), None);
        assert!(built.artifact_sha256.is_some());
    }

    #[test]
    fn a_compiler_failing_on_a_full_remote_engine_disk_is_not_the_programs_failure() {
        let build = tempfile::tempdir().unwrap();
        let failed_saying = |stderr: &str, truncated: bool| InvocationEvent {
            stderr: CapturedStream {
                truncated,
                ..CapturedStream::complete(stderr)
            },
            ..failed_with(1)
        };
        // The linker could not write to the engine's full disk; this host's
        // disk has room, and says nothing about the engine's.
        for words in [
            "/usr/bin/ld: final link failed: No space left on device\n",
            "go: write /build/main: no space left on device\n",
            "error: Disk quota exceeded (os error 122)\n",
        ] {
            let event = failed_saying(words, false);
            let remote = compile_event(event.clone(), build.path(), BuildDisk::Remote);
            let Outcome::SandboxError { message } = &remote.event.outcome else {
                panic!("{words}: {remote:?}");
            };
            assert!(message.contains("says the disk is full"), "{message}");
            assert!(remote.case_event().unwrap().outcome.is_unproven());
            // On this host, the measured free space decides (it has room).
            let local = compile_event(event, build.path(), BuildDisk::Local);
            assert_eq!(local.event.outcome, Outcome::Exited { exit_code: 1 });
        }
        // Output cut short: the words may be in what was dropped.
        let cut = compile_event(
            failed_saying("main.c:1: error: expected ';'\n", true),
            build.path(),
            BuildDisk::Remote,
        );
        assert!(matches!(cut.event.outcome, Outcome::SandboxError { .. }));
        // A plain compile error, complete: the program's.
        let plain = compile_event(
            failed_saying("main.c:1: error: expected ';'\n", false),
            build.path(),
            BuildDisk::Remote,
        );
        assert_eq!(plain.event.outcome, Outcome::Exited { exit_code: 1 });
    }

    #[test]
    fn the_tree_hash_sees_bytes_names_modes_and_nesting() {
        let a = tempfile::tempdir().unwrap();
        std::fs::create_dir(a.path().join("lib")).unwrap();
        std::fs::write(a.path().join("main"), b"\x7fELF...").unwrap();
        std::fs::write(a.path().join("lib/x.o"), b"object").unwrap();
        let first = tree_sha256(a.path()).unwrap();
        assert_eq!(first, tree_sha256(a.path()).unwrap());
        std::fs::write(a.path().join("lib/x.o"), b"objecT").unwrap();
        let changed_bytes = tree_sha256(a.path()).unwrap();
        assert_ne!(first, changed_bytes);
        std::fs::set_permissions(
            a.path().join("main"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_ne!(changed_bytes, tree_sha256(a.path()).unwrap());
        let empty = tempfile::tempdir().unwrap();
        assert_ne!(tree_sha256(empty.path()).unwrap(), first);
    }
}
