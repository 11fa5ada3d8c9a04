//! One invocation: create, attach, start, feed stdin, drain output, wait,
//! inspect, remove — under one deadline, with cleanup on every path.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as BollardError;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, InspectContainerOptions,
    KillContainerOptionsBuilder, RemoveContainerOptionsBuilder, StartContainerOptions,
    WaitContainerOptions,
};
use futures_util::StreamExt;
use progscore_sandbox::{
    Invocation, InvocationEvent, Outcome, Provenance, RuntimeProfile, StreamCapture,
};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use crate::client::{DockerOptions, OWNER_LABEL};
use crate::container::container_spec;
use crate::engine::{EngineFacts, ImageFacts, describe};

/// Everything an invocation needs from its call.
pub(crate) struct InvocationContext<'a> {
    pub docker: &'a Docker,
    pub engine: &'a EngineFacts,
    pub image: &'a ImageFacts,
    pub profile: &'a RuntimeProfile,
    pub options: &'a DockerOptions,
    pub program_on_host: &'a Path,
    pub token: &'a CancellationToken,
}

/// The event, any sandbox warnings, and whether later invocations must not run.
pub(crate) struct InvocationResult {
    pub event: InvocationEvent,
    pub warnings: Vec<String>,
    pub stop_reason: Option<String>,
}

/// How the body of the invocation (attach to stream close and exit) ended.
enum BodyEnd {
    Finished,
    EngineError(String),
    DeadlineExpired,
    Cancelled,
}

pub(crate) async fn run(
    context: &InvocationContext<'_>,
    index: usize,
    invocation: &Invocation,
) -> InvocationResult {
    let started = Instant::now();
    let profile = context.profile;
    let name = format!("progscore-{}-{index}", random_hex());
    let labels = HashMap::from([
        (OWNER_LABEL.to_string(), context.options.owner.clone()),
        ("progscore.profile".to_string(), profile.name.clone()),
    ]);
    let stdin = invocation.stdin.as_ref().map(|s| s.as_bytes().to_vec());
    let spec = container_spec(
        profile,
        &profile.image().map(|i| i.to_string()).unwrap_or_default(),
        context.program_on_host,
        &invocation.args,
        stdin.is_some(),
        &context.options.user,
        labels,
    );
    let mut stdout = StreamCapture::new(profile.limits.output_bytes);
    let mut stderr = StreamCapture::new(profile.limits.output_bytes);
    let mut warnings = Vec::new();

    let create = context
        .docker
        .create_container(
            Some(CreateContainerOptionsBuilder::new().name(&name).build()),
            spec.body,
        )
        .await;
    let body_end = match create {
        Err(err) => BodyEnd::EngineError(format!("creating container {name}: {}", describe(&err))),
        Ok(_) => {
            let deadline = tokio::time::Instant::now() + profile.limits.timeout();
            let body = run_body(context.docker, &name, stdin, &mut stdout, &mut stderr);
            tokio::select! {
                biased;
                _ = context.token.cancelled() => BodyEnd::Cancelled,
                result = tokio::time::timeout_at(deadline, body) => match result {
                    Ok(Ok(())) => BodyEnd::Finished,
                    Ok(Err(message)) => BodyEnd::EngineError(message),
                    Err(_) => BodyEnd::DeadlineExpired,
                },
            }
        }
    };

    if matches!(body_end, BodyEnd::DeadlineExpired | BodyEnd::Cancelled) {
        kill(context.docker, &name).await;
    }
    let outcome = match &body_end {
        BodyEnd::Cancelled => Outcome::NotRun {
            reason: "the call was cancelled".into(),
        },
        BodyEnd::EngineError(message) => Outcome::SandboxError {
            message: message.clone(),
        },
        BodyEnd::Finished | BodyEnd::DeadlineExpired => {
            let timed_out = matches!(body_end, BodyEnd::DeadlineExpired);
            outcome_from_state(context.docker, &name, timed_out).await
        }
    };
    let image_id = container_image(context.docker, &name).await;

    // Removal runs on every path, even when create reported an error: the
    // engine may have created the container before the connection failed.
    let mut stop_reason = match &outcome {
        Outcome::SandboxError { message } => Some(format!(
            "an earlier invocation hit a sandbox error: {message}"
        )),
        Outcome::NotRun { reason } => Some(reason.clone()),
        _ => None,
    };
    if let Err(message) = remove(context.docker, &name).await {
        let warning = format!("failed to remove container {name}: {message}");
        warnings.push(warning.clone());
        stop_reason.get_or_insert(format!("not run: {warning}"));
    }

    let provenance = Provenance {
        backend: "docker".into(),
        runtime: context.engine.runtime_for(profile),
        artifact: profile.image().map(|i| i.to_string()).unwrap_or_default(),
        image_id: Some(image_id.unwrap_or_else(|| context.image.image_id.clone())),
        repo_digests: context.image.repo_digests.clone(),
        engine: context.engine.description.clone(),
        command: spec.argv,
        user: Some(context.options.user.clone()),
        container: Some(name),
        limits: profile.limits.clone(),
    };
    InvocationResult {
        event: InvocationEvent {
            outcome,
            stdout: stdout.finish(),
            stderr: stderr.finish(),
            duration_ms: started.elapsed().as_millis() as u64,
            provenance: Some(provenance),
        },
        warnings,
        stop_reason,
    }
}

/// Attach (before start, so no output is missed), start, feed stdin while
/// draining both streams, then wait for the exit.
async fn run_body(
    docker: &Docker,
    name: &str,
    stdin: Option<Vec<u8>>,
    stdout: &mut StreamCapture,
    stderr: &mut StreamCapture,
) -> Result<(), String> {
    let attach_options = AttachContainerOptionsBuilder::new()
        .stream(true)
        .stdin(stdin.is_some())
        .stdout(true)
        .stderr(true)
        .logs(false)
        .build();
    let attached = docker
        .attach_container(name, Some(attach_options))
        .await
        .map_err(|e| format!("attaching to container {name}: {}", describe(&e)))?;
    docker
        .start_container(name, None::<StartContainerOptions>)
        .await
        .map_err(|e| format!("starting container {name}: {}", describe(&e)))?;

    let mut input = attached.input;
    let feed = async move {
        if let Some(bytes) = stdin {
            // A program may exit without reading its input: a failed write is
            // its business, not a sandbox fault.
            if let Err(err) = input.write_all(&bytes).await {
                tracing::debug!("stdin write ended early: {err}");
            }
        }
        // Closing our side gives the program EOF (the container has StdinOnce).
        let _closed = input.shutdown().await;
    };
    let mut output = attached.output;
    let drain = async {
        while let Some(chunk) = output.next().await {
            match chunk {
                Ok(LogOutput::StdOut { message }) => stdout.push(&message),
                Ok(LogOutput::StdErr { message }) => stderr.push(&message),
                Ok(LogOutput::Console { message }) => stdout.push(&message),
                Ok(LogOutput::StdIn { .. }) => {}
                Err(err) => {
                    return Err(format!(
                        "reading the output of container {name}: {}",
                        describe(&err)
                    ));
                }
            }
        }
        Ok(())
    };
    let ((), drained) = tokio::join!(feed, drain);
    drained?;

    let mut wait = docker.wait_container(name, None::<WaitContainerOptions>);
    match wait.next().await {
        Some(Ok(_)) | None => Ok(()),
        // bollard reports a non-zero exit as an error; the state says which.
        Some(Err(BollardError::DockerContainerWaitError { .. })) => Ok(()),
        Some(Err(err)) => Err(format!("waiting for container {name}: {}", describe(&err))),
    }
}

/// The outcome from the container's inspected state, never from a guess.
async fn outcome_from_state(docker: &Docker, name: &str, timed_out: bool) -> Outcome {
    let inspect = match docker
        .inspect_container(name, None::<InspectContainerOptions>)
        .await
    {
        Ok(inspect) => inspect,
        Err(err) if timed_out => {
            tracing::warn!("inspecting timed-out container {name}: {}", describe(&err));
            return Outcome::TimedOut;
        }
        Err(err) => {
            return Outcome::SandboxError {
                message: format!("inspecting container {name}: {}", describe(&err)),
            };
        }
    };
    let state = inspect.state.unwrap_or_default();
    if state.oom_killed == Some(true) {
        return Outcome::MemoryLimit;
    }
    if timed_out {
        return Outcome::TimedOut;
    }
    if state.running == Some(true) {
        return Outcome::SandboxError {
            message: format!(
                "container {name} still running after its streams closed and wait returned"
            ),
        };
    }
    match state.exit_code {
        Some(exit_code) => Outcome::Exited { exit_code },
        None => Outcome::SandboxError {
            message: format!("container {name} has no exit code in its state"),
        },
    }
}

async fn container_image(docker: &Docker, name: &str) -> Option<String> {
    docker
        .inspect_container(name, None::<InspectContainerOptions>)
        .await
        .ok()
        .and_then(|inspect| inspect.image)
}

async fn kill(docker: &Docker, name: &str) {
    let options = KillContainerOptionsBuilder::new().signal("SIGKILL").build();
    if let Err(err) = docker.kill_container(name, Some(options)).await {
        // Already exited or never started: removal below still applies.
        tracing::debug!("kill {name}: {}", describe(&err));
    }
}

/// Force-removes the container and its anonymous volumes. A container that
/// does not exist is already removed.
async fn remove(docker: &Docker, name: &str) -> Result<(), String> {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(name, Some(options)).await {
        Ok(()) => Ok(()),
        Err(BollardError::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Err(err) => Err(describe(&err)),
    }
}

/// 64 random bits as hex, from the standard library's randomly seeded hasher.
pub(crate) fn random_hex() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:016x}", hasher.finish())
}
