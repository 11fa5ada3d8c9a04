//! How a call's program (and its build folder) reach its containers.
//!
//! On an engine of this host (a unix socket) they are bind-mounted from the
//! call's private workspace. An engine reached over TCP or SSH cannot see
//! this host's files: there the call gets two volumes on the engine, filled
//! through the archive API of a "loader" container that is created and never
//! started (Docker refuses to copy into a read-only root filesystem, but not
//! into a volume of a container that is not hardened because it never
//! runs). The cases mount them read-only, as they would the bind mounts,
//! and the build comes back through the same loader to be hashed here.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, VolumeCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures_util::TryStreamExt;
use progscore_sandbox::{BUILD_PATH, ProgramFiles, RuntimeProfile, SANDBOX_DIR};

use crate::engine::describe;
use crate::held::{ActiveContainers, InUse};
use crate::options::OWNER_LABEL;

/// Where a call's files are for its containers.
pub(crate) enum Files<'a> {
    /// Bind mounts from this host's workspace.
    Host {
        /// The program's file, or its folder when it brings files.
        program: &'a Path,
        /// Where `program` is mounted.
        program_target: &'a str,
        build: Option<&'a Path>,
    },
    /// Volumes on the engine (by name).
    Volumes {
        sandbox: &'a str,
        build: Option<&'a str>,
        /// Whether the program brought files (in the sandbox volume).
        with_files: bool,
    },
}

impl Files<'_> {
    /// Where the program starts: its folder when it brought files (so that
    /// relative paths find them, as where it came from), else `/tmp`.
    pub(crate) fn working_dir(&self) -> &'static str {
        let with_files = match self {
            Files::Host { program_target, .. } => *program_target == SANDBOX_DIR,
            Files::Volumes { with_files, .. } => *with_files,
        };
        if with_files { SANDBOX_DIR } else { "/tmp" }
    }

    /// The container's mounts: the program read-only; the build folder
    /// writable for the compile, read-only for the cases.
    pub(crate) fn mounts(&self, build_writable: Option<bool>) -> Vec<Mount> {
        let mut mounts = Vec::new();
        match self {
            Files::Host {
                program,
                program_target,
                build,
            } => {
                mounts.push(Mount {
                    target: Some(program_target.to_string()),
                    source: Some(program.display().to_string()),
                    typ: Some(MountType::BIND),
                    read_only: Some(true),
                    ..Default::default()
                });
                if let (Some(writable), Some(build)) = (build_writable, build) {
                    mounts.push(Mount {
                        target: Some(BUILD_PATH.into()),
                        source: Some(build.display().to_string()),
                        typ: Some(MountType::BIND),
                        read_only: Some(!writable),
                        ..Default::default()
                    });
                }
            }
            Files::Volumes { sandbox, build, .. } => {
                mounts.push(volume_mount(sandbox, SANDBOX_DIR, true));
                if let (Some(writable), Some(build)) = (build_writable, build) {
                    mounts.push(volume_mount(build, BUILD_PATH, !writable));
                }
            }
        }
        mounts
    }
}

fn volume_mount(name: &str, target: &str, read_only: bool) -> Mount {
    Mount {
        target: Some(target.into()),
        source: Some(name.into()),
        typ: Some(MountType::VOLUME),
        read_only: Some(read_only),
        // Nothing of the image is copied into the volume.
        volume_options: Some(bollard::models::MountVolumeOptions {
            no_copy: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The volumes and the loader of one call on a remote engine. Removed by
/// [`EngineFiles::remove`]; what cannot be removed is left to the engine's
/// sweep (labelled with the owner).
pub(crate) struct EngineFiles<'a> {
    pub sandbox: String,
    pub build: Option<String>,
    with_files: bool,
    /// The compile's bound on the build (`compile_limits.build`): no more
    /// than this is copied back.
    build_limit: Option<u64>,
    loader: String,
    _in_use: Vec<InUse<'a>>,
}

impl<'a> EngineFiles<'a> {
    /// Creates the volumes and the loader, and copies the program and its
    /// files in (and an empty build folder owned by the profile's user,
    /// 0700).
    pub(crate) async fn create(
        docker: &Docker,
        active: &'a ActiveContainers,
        owner: &str,
        profile: &RuntimeProfile,
        program: &[u8],
        program_files: &ProgramFiles,
        engine_timeout: Duration,
    ) -> Result<EngineFiles<'a>, (String, Option<EngineFiles<'a>>)> {
        let base = format!("progscore-{}", progscore_sandbox::owner::random_hex());
        let sandbox = format!("{base}-sandbox");
        let build = profile.compile.as_ref().map(|_| format!("{base}-build"));
        let loader = format!("{base}-loader");
        let mut in_use = vec![active.hold(&sandbox), active.hold(&loader)];
        if let Some(build) = &build {
            in_use.push(active.hold(build));
        }
        let files = EngineFiles {
            sandbox,
            build,
            with_files: !program_files.is_empty(),
            build_limit: profile
                .limits_of(progscore_sandbox::Stage::Compile)
                .build_bytes,
            loader,
            _in_use: in_use,
        };
        let bounded = |what: String| move |e: Bounded| (format!("{what}: {e}"), None::<()>);
        let labels = HashMap::from([(OWNER_LABEL.to_string(), owner.to_string())]);
        for volume in std::iter::once(&files.sandbox).chain(&files.build) {
            let request = VolumeCreateRequest {
                name: Some(volume.clone()),
                labels: Some(labels.clone()),
                ..Default::default()
            };
            if let Err(e) = bound(engine_timeout, docker.create_volume(request)).await {
                let (message, _) = bounded(format!("creating volume {volume}"))(e);
                return Err((message, Some(files)));
            }
        }
        let image = profile.image().map(|i| i.to_string()).unwrap_or_default();
        let build_mount = files
            .build
            .as_deref()
            .map(|b| volume_mount(b, BUILD_PATH, false));
        let body = ContainerCreateBody {
            image: Some(image),
            entrypoint: Some(vec!["true".into()]),
            cmd: Some(Vec::new()),
            network_disabled: Some(true),
            labels: Some(labels),
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                mounts: Some(
                    std::iter::once(volume_mount(&files.sandbox, SANDBOX_DIR, false))
                        .chain(build_mount)
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::new()
            .name(&files.loader)
            .build();
        if let Err(e) = bound(engine_timeout, docker.create_container(Some(options), body)).await {
            let (message, _) = bounded(format!("creating loader {}", files.loader))(e);
            return Err((message, Some(files)));
        }
        let archive = match program_archive(profile, program, program_files) {
            Ok(archive) => archive,
            Err(e) => return Err((format!("packing the program: {e}"), Some(files))),
        };
        let options = UploadToContainerOptionsBuilder::new().path("/").build();
        let upload = docker.upload_to_container(
            &files.loader,
            Some(options),
            bollard::body_full(archive.into()),
        );
        if let Err(e) = bound(engine_timeout, upload).await {
            let (message, _) = bounded(format!("copying the program into {}", files.loader))(e);
            return Err((message, Some(files)));
        }
        Ok(files)
    }

    /// The files as mounts see them.
    pub(crate) fn files(&self) -> Files<'_> {
        Files::Volumes {
            sandbox: &self.sandbox,
            build: self.build.as_deref(),
            with_files: self.with_files,
        }
    }

    /// Copies the build folder back into `into` (an empty folder of this
    /// host), to be hashed (and its size bounded) as a local build is. The
    /// archive is unpacked as it arrives, never held whole in memory; a
    /// build over its bound stops the copy with a stand-in that keeps it
    /// over the bound here too (see [`unpack_build`]).
    pub(crate) async fn fetch_build(
        &self,
        docker: &Docker,
        into: &Path,
        engine_timeout: Duration,
    ) -> Result<(), String> {
        let options = DownloadFromContainerOptionsBuilder::new()
            .path(BUILD_PATH)
            .build();
        let (chunks, received) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
        let unpack = {
            let into = into.to_path_buf();
            let limit = self.build_limit;
            tokio::task::spawn_blocking(move || {
                unpack_build(
                    ChunkReader {
                        chunks: received,
                        current: Vec::new(),
                        at: 0,
                    },
                    &into,
                    limit,
                )
            })
        };
        let download = async {
            let mut stream = docker.download_from_container(&self.loader, Some(options));
            while let Some(chunk) = stream.try_next().await? {
                // The unpacker stopped (the build is over its bound, or the
                // archive is bad): nothing more is needed.
                if chunks.send(chunk.to_vec()).await.is_err() {
                    break;
                }
            }
            Ok::<(), BollardError>(())
        };
        let downloaded = bound(engine_timeout, download).await;
        // The end of the archive (or of the copy, which then fails below).
        drop(chunks);
        let unpacked = unpack
            .await
            .map_err(|e| format!("unpacking the build: {e}"))?;
        downloaded.map_err(|e| format!("copying the build back: {e}"))?;
        unpacked.map_err(|e| format!("unpacking the build: {e}"))
    }

    /// Removes the loader and the volumes; the warnings of what failed (left
    /// for the engine's sweep).
    pub(crate) async fn remove(self, docker: &Docker, engine_timeout: Duration) -> Vec<String> {
        let mut warnings = Vec::new();
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        match bound(
            engine_timeout,
            docker.remove_container(&self.loader, Some(options)),
        )
        .await
        {
            Ok(())
            | Err(Bounded::Engine(BollardError::DockerResponseServerError {
                status_code: 404,
                ..
            })) => {}
            Err(e) => warnings.push(format!("failed to remove loader {}: {e}", self.loader)),
        }
        for volume in std::iter::once(&self.sandbox).chain(&self.build) {
            let options = RemoveVolumeOptionsBuilder::new().force(true).build();
            match bound(engine_timeout, docker.remove_volume(volume, Some(options))).await {
                Ok(())
                | Err(Bounded::Engine(BollardError::DockerResponseServerError {
                    status_code: 404,
                    ..
                })) => {}
                Err(e) => warnings.push(format!("failed to remove volume {volume}: {e}")),
            }
        }
        warnings
    }
}

/// An engine request's failure, or its expiry.
enum Bounded {
    Engine(BollardError),
    Expired(Duration),
}

impl std::fmt::Display for Bounded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bounded::Engine(e) => f.write_str(&describe(e)),
            Bounded::Expired(limit) => write!(f, "the engine did not answer within {limit:?}"),
        }
    }
}

async fn bound<T>(
    limit: Duration,
    request: impl std::future::Future<Output = Result<T, BollardError>>,
) -> Result<T, Bounded> {
    match tokio::time::timeout(limit, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(Bounded::Engine(e)),
        Err(_) => Err(Bounded::Expired(limit)),
    }
}

/// A tar of `sandbox/<source>` and the program's files (root's, 0444, in
/// folders of 0555) and, for a profile that compiles, `build/` (the profile
/// user's, 0700): what the bind mounts of a local workspace give.
fn program_archive(
    profile: &RuntimeProfile,
    program: &[u8],
    files: &ProgramFiles,
) -> std::io::Result<Vec<u8>> {
    let mut archive = tar::Builder::new(Vec::new());
    let entry = |path: &str, kind: tar::EntryType, mode: u32, (uid, gid): (u32, u32), size: u64| {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_uid(u64::from(uid));
        header.set_gid(u64::from(gid));
        header.set_size(size);
        header.set_mtime(0);
        (header, path.to_string())
    };
    let sandbox = SANDBOX_DIR.trim_start_matches('/');
    let (mut header, path) = entry(
        &format!("{sandbox}/"),
        tar::EntryType::Directory,
        0o755,
        (0, 0),
        0,
    );
    archive.append_data(&mut header, path, std::io::empty())?;
    let file = profile.program_path().trim_start_matches('/').to_string();
    let (mut header, path) = entry(
        &file,
        tar::EntryType::Regular,
        0o444,
        (0, 0),
        program.len() as u64,
    );
    archive.append_data(&mut header, path, program)?;
    let mut folders = std::collections::BTreeSet::new();
    for (relative, bytes) in files.iter() {
        let mut parent = std::path::Path::new(relative).parent();
        let mut missing = Vec::new();
        while let Some(folder) = parent.filter(|p| !p.as_os_str().is_empty()) {
            missing.push(folder.to_string_lossy().into_owned());
            parent = folder.parent();
        }
        for folder in missing.into_iter().rev() {
            if folders.insert(folder.clone()) {
                let (mut header, path) = entry(
                    &format!("{sandbox}/{folder}/"),
                    tar::EntryType::Directory,
                    0o555,
                    (0, 0),
                    0,
                );
                archive.append_data(&mut header, path, std::io::empty())?;
            }
        }
        let (mut header, path) = entry(
            &format!("{sandbox}/{relative}"),
            tar::EntryType::Regular,
            0o444,
            (0, 0),
            bytes.len() as u64,
        );
        archive.append_data(&mut header, path, bytes)?;
    }
    if profile.compile.is_some() {
        let build = format!("{}/", BUILD_PATH.trim_start_matches('/'));
        let (mut header, path) = entry(
            &build,
            tar::EntryType::Directory,
            0o700,
            profile.user_ids(),
            0,
        );
        archive.append_data(&mut header, path, std::io::empty())?;
    }
    archive.into_inner()
}

/// The chunks of a download as one byte stream (read on a blocking thread).
struct ChunkReader {
    chunks: tokio::sync::mpsc::Receiver<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
}

impl std::io::Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.current.len() {
            match self.chunks.blocking_recv() {
                Some(chunk) => {
                    self.current = chunk;
                    self.at = 0;
                }
                // The sender is gone: the end (or a failed copy, which the
                // caller reports whatever this read says).
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Unpacks the engine's tar of `/build` (entries under `build/`) over the
/// empty build folder `into` (named `build`), keeping modes: the build's
/// hash covers them. Entries that would leave the folder are skipped.
///
/// With a `limit`, entries are counted as the build's size is counted
/// locally ([`progscore_container::build_size`]); once past it, the rest is
/// not unpacked and a sparse stand-in file takes its place, so that the
/// folder is over the limit here as it was on the engine (the compile is
/// then the program's `compile_error`), without the bytes being copied.
fn unpack_build(tar: impl std::io::Read, into: &Path, limit: Option<u64>) -> std::io::Result<()> {
    use progscore_container::BUILD_ENTRY_BYTES;
    let parent = into
        .parent()
        .filter(|_| into.file_name() == Some(std::ffi::OsStr::new("build")))
        .ok_or_else(|| {
            std::io::Error::other(format!("{} is not a build folder", into.display()))
        })?;
    let mut archive = tar::Archive::new(tar);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(true);
    let mut size = 0u64;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let inside = {
            let path = entry.path()?;
            path.components().count() > 1
        };
        if inside {
            size = size.saturating_add(BUILD_ENTRY_BYTES);
            if entry.header().entry_type().is_file() {
                size = size.saturating_add(entry.header().size()?);
            }
        }
        if let Some(limit) = limit
            && size > limit
        {
            let stand_in = into.join(".progscore-over-limit");
            let file = std::fs::File::create(&stand_in)?;
            file.set_len(limit.saturating_add(1))?;
            return Ok(());
        }
        entry.unpack_in(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar of `build/` holding `files` (name, size), as the engine sends it.
    fn build_tar(files: &[(&str, usize)]) -> Vec<u8> {
        let mut archive = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(0o700);
        header.set_size(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        archive
            .append_data(&mut header, "build/", std::io::empty())
            .unwrap();
        for (name, size) in files {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(0o755);
            header.set_size(*size as u64);
            header.set_uid(0);
            header.set_gid(0);
            header.set_mtime(0);
            archive
                .append_data(&mut header, format!("build/{name}"), &vec![7u8; *size][..])
                .unwrap();
        }
        archive.into_inner().unwrap()
    }

    #[test]
    fn a_build_over_its_bound_is_not_copied_and_stays_over_it_here() {
        let limit = 64 << 10;
        let dir = tempfile::tempdir().unwrap();
        let into = dir.path().join("build");
        std::fs::create_dir(&into).unwrap();
        let tar = build_tar(&[("a", 1000), ("main", 8 << 20)]);
        unpack_build(&tar[..], &into, Some(limit)).unwrap();
        assert!(!into.join("main").exists(), "the oversized file was copied");
        assert_eq!(std::fs::read(into.join("a")).unwrap().len(), 1000);
        let size = progscore_container::build_size(&into, u64::MAX).unwrap();
        assert!(size > limit, "{size}");
        // Within the bound: every file, measured as locally.
        let dir = tempfile::tempdir().unwrap();
        let into = dir.path().join("build");
        std::fs::create_dir(&into).unwrap();
        unpack_build(
            &build_tar(&[("a", 1000), ("main", 9000)])[..],
            &into,
            Some(limit),
        )
        .unwrap();
        assert_eq!(std::fs::read(into.join("main")).unwrap().len(), 9000);
        assert_eq!(
            progscore_container::build_size(&into, u64::MAX).unwrap(),
            2 * 512 + 1000 + 9000
        );
    }
}
