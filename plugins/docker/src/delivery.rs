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
use progscore_sandbox::{BUILD_PATH, RuntimeProfile, SANDBOX_DIR};

use crate::engine::describe;
use crate::options::OWNER_LABEL;
use crate::pool::{ActiveContainers, InUse};

/// Where a call's files are for its containers.
pub(crate) enum Files<'a> {
    /// Bind mounts from this host's workspace.
    Host {
        program: &'a Path,
        build: Option<&'a Path>,
    },
    /// Volumes on the engine (by name).
    Volumes {
        sandbox: &'a str,
        build: Option<&'a str>,
    },
}

impl Files<'_> {
    /// The container's mounts: the program read-only; the build folder
    /// writable for the compile, read-only for the cases.
    pub(crate) fn mounts(
        &self,
        profile: &RuntimeProfile,
        build_writable: Option<bool>,
    ) -> Vec<Mount> {
        let mut mounts = Vec::new();
        match self {
            Files::Host { program, build } => {
                mounts.push(Mount {
                    target: Some(profile.program_path()),
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
            Files::Volumes { sandbox, build } => {
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
    loader: String,
    _in_use: Vec<InUse<'a>>,
}

impl<'a> EngineFiles<'a> {
    /// Creates the volumes and the loader, and copies the program in (and
    /// an empty build folder owned by the profile's user, 0700).
    pub(crate) async fn create(
        docker: &Docker,
        active: &'a ActiveContainers,
        owner: &str,
        profile: &RuntimeProfile,
        program: &[u8],
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
        let archive = match program_archive(profile, program) {
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
        }
    }

    /// Copies the build folder back into `into` (an empty folder of this
    /// host), to be hashed as a local build is.
    pub(crate) async fn fetch_build(
        &self,
        docker: &Docker,
        into: &Path,
        engine_timeout: Duration,
    ) -> Result<(), String> {
        let options = DownloadFromContainerOptionsBuilder::new()
            .path(BUILD_PATH)
            .build();
        let download = async {
            docker
                .download_from_container(&self.loader, Some(options))
                .map_ok(|chunk| chunk.to_vec())
                .try_concat()
                .await
        };
        let tar = bound(engine_timeout, download)
            .await
            .map_err(|e| format!("copying the build back: {e}"))?;
        unpack_build(&tar, into).map_err(|e| format!("unpacking the build: {e}"))
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

/// A tar of `sandbox/<source>` (root's, 0444) and, for a profile that
/// compiles, `build/` (the profile user's, 0700): what the bind mounts of a
/// local workspace give.
fn program_archive(profile: &RuntimeProfile, program: &[u8]) -> std::io::Result<Vec<u8>> {
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

/// Unpacks the engine's tar of `/build` (entries under `build/`) over the
/// empty build folder `into` (named `build`), keeping modes: the build's
/// hash covers them. Entries that would leave the folder are skipped.
fn unpack_build(tar: &[u8], into: &Path) -> std::io::Result<()> {
    let parent = into
        .parent()
        .filter(|_| into.file_name() == Some(std::ffi::OsStr::new("build")))
        .ok_or_else(|| {
            std::io::Error::other(format!("{} is not a build folder", into.display()))
        })?;
    let mut archive = tar::Archive::new(tar);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(true);
    archive.unpack(parent)
}
