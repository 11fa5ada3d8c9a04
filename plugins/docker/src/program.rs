//! One program on the engines: the freest engine that can run it, its
//! workspace and files there, its compile and cases in order (each run again
//! alone when its timeout must be confirmed, or after the engine came back),
//! and its move to another engine when its engine stops answering. One
//! concern, kept whole: how a call survives the engine's faults.

use std::sync::Arc;

use progscore_container::{BuildDisk, Cases, Load, Place, Schedule, Workspace, compile_event};
use progscore_sandbox::timing::{ALONE_RUNS, alone_run_warning};
use progscore_sandbox::{
    CaseSink, CompileEvent, ConversationSide, Invocation, InvocationEvent, Outcome, ProgramFiles,
    ProgramRun, RuntimeProfile, SandboxError, Side, Stage, sha256_hex,
};
use tokio_util::sync::CancellationToken;

use crate::delivery::{EngineFiles, Files};
use crate::health::Unavailable;
use crate::held::remove_leftover;
use crate::invocation::{self, InvocationContext, Next};
use crate::options::DockerOptions;
use crate::pool::{Lease, NoEngine, Pool};

/// How many times one invocation runs again after the engine dropped it.
const MAX_OUTAGE_RERUNS: usize = 2;

/// How many times a program moves to another engine after the one running
/// it stopped answering.
const MAX_MOVES: usize = 2;

/// Why a program's run on one engine ended without a run.
enum CallFault {
    /// No engine can run it (the message says why).
    Unavailable(SandboxError),
    /// Its engine stopped answering and another can take it: run it again
    /// there, from the start (the text says what was lost).
    Moved(String),
}

/// Runs programs on the pool's engines.
pub(crate) struct Runner {
    pub options: DockerOptions,
    /// The engines, and this client's owner.
    pub pool: Arc<Pool>,
    /// Programs of this client inside their window, on every engine.
    load: Load,
    /// Shared by every invocation; taken exclusively to confirm a timeout
    /// with no other program of this client running on any engine (engines
    /// may share a host).
    schedule: Schedule,
}

impl Runner {
    pub(crate) fn new(options: DockerOptions, pool: Arc<Pool>) -> Runner {
        Runner {
            options,
            pool,
            load: Load::default(),
            schedule: Schedule::default(),
        }
    }

    /// The program on the freest engine that can run it; again from the
    /// start on another engine when its engine stops answering and another
    /// can take it.
    #[allow(
        clippy::too_many_arguments,
        reason = "the request's parts, checked, and the call's token"
    )]
    pub(crate) async fn place(
        &self,
        program: &[u8],
        profile: &RuntimeProfile,
        files: &ProgramFiles,
        invocations: &[Invocation],
        on_case: Option<&CaseSink>,
        conversation: Option<&ConversationSide>,
        token: &CancellationToken,
    ) -> Result<ProgramRun, SandboxError> {
        self.pool.contact().await?;
        let mut moves: Vec<String> = Vec::new();
        // An interactor rides on its program's place: the program waited
        // for capacity, and the pair must never wait on each other's.
        let beside = conversation.is_some_and(|side| side.side() == Side::Interactor);
        loop {
            let lease = match self.pool.acquire(profile, beside, token).await {
                Ok(lease) => lease,
                Err(NoEngine::Error(error)) => return Err(error),
                Err(NoEngine::Cancelled) => {
                    return Err(SandboxError::Setup {
                        message: "the call was cancelled while it waited for an engine".into(),
                    });
                }
            };
            if let Some(side) = conversation {
                side.placed();
            }
            match self
                .run_on(
                    &lease,
                    program,
                    profile,
                    files,
                    invocations,
                    on_case,
                    conversation,
                    token,
                )
                .await
            {
                Ok(mut run) => {
                    let moved = moves.iter().map(|lost| {
                        format!("{lost}; the program ran again from the start on another engine")
                    });
                    run.sandbox_warnings.splice(0..0, moved);
                    return Ok(run);
                }
                Err(CallFault::Unavailable(error)) => return Err(error),
                Err(CallFault::Moved(lost)) => {
                    drop(lease);
                    moves.push(lost);
                    if moves.len() > MAX_MOVES {
                        // Nothing of it is evidence: every case unproven.
                        let reason = format!(
                            "the engines running this program stopped answering {} times: {}",
                            moves.len(),
                            moves.join("; ")
                        );
                        return Ok(ProgramRun {
                            interaction: None,
                            profile: profile.name.clone(),
                            program_sha256: sha256_hex(program),
                            events: invocations
                                .iter()
                                .map(|_| InvocationEvent::not_run(reason.clone()))
                                .collect(),
                            sandbox_warnings: moves,
                            compile: None,
                        });
                    }
                }
            }
        }
    }

    /// The whole program on one engine: its workspace, its compile, its
    /// cases in order.
    #[allow(
        clippy::too_many_arguments,
        reason = "the request's parts as `place` has them, and the engine's lease"
    )]
    async fn run_on(
        &self,
        lease: &Lease<'_>,
        program: &[u8],
        profile: &RuntimeProfile,
        files: &ProgramFiles,
        invocations: &[Invocation],
        on_case: Option<&CaseSink>,
        conversation: Option<&ConversationSide>,
        token: &CancellationToken,
    ) -> Result<ProgramRun, CallFault> {
        // The interactor's invocations (its compile too) take their slots
        // beside its program's, which waits for them.
        let beside = conversation.is_some_and(|side| side.side() == Side::Interactor);
        let pooled = lease.engine();
        let (runtime, image) = self
            .pool
            .check(lease.index, profile)
            .await
            .map_err(CallFault::Unavailable)?;
        let Some(engine) = pooled.connected() else {
            return Err(CallFault::Unavailable(SandboxError::EngineUnavailable {
                message: format!(
                    "the Docker engine {} was not reached",
                    pooled.health.described()
                ),
            }));
        };
        let owner = &self.pool.owner;
        let (mut warnings, _) = pooled
            .remove_leftovers(owner, self.options.engine_timeout)
            .await;
        self.pool.forget_leftovers_if_none();
        let workspace = Workspace::create(owner.dir(), program, profile, files).map_err(|e| {
            CallFault::Unavailable(SandboxError::Setup {
                message: format!(
                    "cannot create a workspace under {}: {e}",
                    owner.dir().display()
                ),
            })
        })?;
        let build_dir = match workspace.build_dir_for(profile) {
            Ok(build_dir) => build_dir,
            Err(error) => {
                if let Err(warning) = workspace.remove() {
                    tracing::warn!("{warning}");
                }
                return Err(CallFault::Unavailable(error));
            }
        };
        // An engine elsewhere gets the files in volumes of its own.
        let mut engine_files = None;
        let mut delivery_fault = None;
        if !pooled.options.endpoint.is_local() {
            match EngineFiles::create(
                &engine.docker,
                &pooled.active,
                owner.name(),
                profile,
                program,
                files,
                self.options.engine_timeout,
            )
            .await
            {
                Ok(files) => engine_files = Some(files),
                Err((message, partial)) => {
                    engine_files = partial;
                    delivery_fault = Some(message);
                }
            }
        }
        let files = match &engine_files {
            Some(remote) => remote.files(),
            None => Files::Host {
                program: workspace.program_path(),
                program_target: workspace.program_target(),
                build: build_dir.as_deref(),
            },
        };
        let context = InvocationContext {
            docker: &engine.docker,
            engine: &engine.facts,
            engine_name: self.pool.is_pool().then(|| pooled.name()),
            active: &pooled.active,
            health: &pooled.health,
            image: &image,
            profile,
            runtime: &runtime,
            options: &self.options,
            owner: owner.name(),
            cgroups: engine.cgroups.as_ref(),
            load: &self.load,
            files: &files,
            stage: Stage::Case,
            conversation,
            beside,
            token,
        };
        let ran = match delivery_fault {
            None => {
                self.run_program(
                    lease,
                    &context,
                    engine_files.as_ref(),
                    build_dir.as_deref(),
                    invocations,
                    on_case,
                    &mut warnings,
                )
                .await
            }
            Some(message) => {
                let lost = if pooled.health.confirm_outage(&engine.docker, &message).await
                    && self.pool.another_is_up(profile, lease.index)
                {
                    self.pool.probe(lease.index);
                    Some(CallFault::Moved(format!(
                        "the Docker engine {} stopped answering while the program was copied to it: {message}",
                        pooled.health.described()
                    )))
                } else {
                    None
                };
                match lost {
                    Some(lost) => Err(lost),
                    // Nothing ran: every case unproven.
                    None => Ok((
                        invocations
                            .iter()
                            .enumerate()
                            .map(|(index, _)| {
                                if index == 0 {
                                    InvocationEvent::sandbox_error(format!(
                                        "cannot copy the program to the Docker engine {}: {message}",
                                        pooled.health.described()
                                    ))
                                } else {
                                    InvocationEvent::not_run(
                                        "an earlier invocation hit a sandbox error",
                                    )
                                }
                            })
                            .collect(),
                        None,
                    )),
                }
            }
        };
        if let Some(remote) = engine_files {
            // What fails stays labelled with this owner: the engine's sweep
            // takes it (at its return, or the next start's).
            let failed = remote
                .remove(&engine.docker, self.options.engine_timeout)
                .await;
            if !failed.is_empty() {
                pooled.must_be_swept(owner);
                warnings.extend(failed);
            }
        }
        if let Err(warning) = workspace.remove() {
            warnings.push(warning.to_string());
        }
        // Nothing of a lost run is evidence: the engine is gone.
        let (events, compile) = ran?;
        Ok(ProgramRun {
            interaction: None,
            profile: profile.name.clone(),
            program_sha256: sha256_hex(program),
            events,
            sandbox_warnings: warnings,
            compile,
        })
    }

    /// The compile (when the profile has one) and the cases, in order, on
    /// the context's engine.
    #[allow(
        clippy::too_many_arguments,
        reason = "the context, the program's files and build, its cases and their sink"
    )]
    async fn run_program(
        &self,
        lease: &Lease<'_>,
        context: &InvocationContext<'_>,
        engine_files: Option<&EngineFiles<'_>>,
        build_dir: Option<&std::path::Path>,
        invocations: &[Invocation],
        on_case: Option<&CaseSink>,
        warnings: &mut Vec<String>,
    ) -> Result<(Vec<InvocationEvent>, Option<CompileEvent>), CallFault> {
        let token = context.token;
        let mut compile = None;
        if let Some(build_dir) = build_dir {
            let compile_context = InvocationContext {
                stage: Stage::Compile,
                conversation: None,
                ..*context
            };
            let (mut event, _) = self
                .run_invocation(lease, &compile_context, 0, &Invocation::default(), warnings)
                .await?;
            // A build made elsewhere comes back to be hashed here.
            if let Some(remote) = engine_files
                && matches!(event.outcome, Outcome::Exited { exit_code: 0 })
                && let Err(message) = remote
                    .fetch_build(context.docker, build_dir, self.options.engine_timeout)
                    .await
            {
                event.outcome = Outcome::SandboxError { message };
            }
            // The build disk of an engine elsewhere is its own, unseen from here.
            let disk = match engine_files {
                Some(_) => BuildDisk::Remote,
                None => BuildDisk::Local,
            };
            compile = Some(compile_event(event, build_dir, disk));
        }
        let mut cases = Cases::new(compile.as_ref(), token, on_case);
        for (index, invocation) in invocations.iter().enumerate() {
            if cases.decided() {
                continue;
            }
            let (event, stop) = self
                .run_invocation(lease, context, index, invocation, warnings)
                .await?;
            cases.ran(event, stop);
        }
        let events = cases.into_events();
        Ok((events, compile))
    }

    /// One invocation, run again alone when its timeout must be confirmed,
    /// and again when the engine dropped it and came back. `Err` when the
    /// engine was lost: the program moves to another engine when one can
    /// take it, else fails when the engine did not come back within the
    /// outage wait.
    async fn run_invocation(
        &self,
        lease: &Lease<'_>,
        context: &InvocationContext<'_>,
        index: usize,
        invocation: &Invocation,
        warnings: &mut Vec<String>,
    ) -> Result<(InvocationEvent, Option<String>), CallFault> {
        let pooled = lease.engine();
        let owner = &self.pool.owner;
        let token = context.token;
        let mut alone_runs = 0;
        let mut outages = 0;
        loop {
            let alone = alone_runs > 0;
            // Alone: no other program of this client runs meanwhile. Only
            // the wait for the slot is cut short by a cancellation; a
            // started invocation cleans up after itself.
            let place = if alone {
                Place::Alone
            } else if context.beside {
                Place::Beside
            } else {
                Place::Shared
            };
            let Some(slot) = self.schedule.slot(place, token).await else {
                return Ok((
                    InvocationEvent::not_run("the call was cancelled"),
                    Some("the call was cancelled".into()),
                ));
            };
            let mut result = invocation::run(context, index, invocation, alone).await;
            // Held for the invocation only: a call waiting out its engine's
            // outage below must not keep a confirmation run on another
            // engine (which takes the schedule whole) waiting with it.
            drop(slot);
            warnings.extend(result.warnings);
            if let Some(leftover) = result.leftover.take() {
                pooled.keep_leftover(owner, leftover);
            }
            match result.next {
                Next::Continue => return Ok((result.event, None)),
                Next::Stop(reason) => return Ok((result.event, Some(reason))),
                // A case of a conversation runs once: the other side's
                // case has ended. Its event says what is unproven.
                Next::ConfirmAlone(_) if context.conversation.is_some() => {
                    return Ok((result.event, None));
                }
                Next::EngineLost(leftover) if context.conversation.is_some() => {
                    pooled.keep_leftover(owner, leftover);
                    let lost = format!(
                        "the Docker engine {} stopped answering during invocation {index} of a conversation, which cannot run again: {}",
                        pooled.health.described(),
                        sandbox_message(&result.event)
                    );
                    return Ok((result.event, Some(lost)));
                }
                Next::ConfirmAlone(why) if alone_runs < ALONE_RUNS => {
                    alone_runs += 1;
                    warnings.push(alone_run_warning(index, alone_runs, &why));
                }
                // Still unproven alone: the event says so (an unconfirmed timeout).
                Next::ConfirmAlone(_) => return Ok((result.event, None)),
                Next::EngineLost(leftover) => {
                    let lost = format!(
                        "the Docker engine {} stopped answering during invocation {index}: {}",
                        pooled.health.described(),
                        sandbox_message(&result.event)
                    );
                    if self.pool.another_is_up(context.profile, lease.index) {
                        // Removed when the engine is back, before it runs
                        // anything again.
                        pooled.keep_leftover(owner, leftover);
                        self.pool.probe(lease.index);
                        return Err(CallFault::Moved(lost));
                    }
                    match pooled.health.wait_until_up(context.docker, token).await {
                        Ok(()) => {
                            if let Err(e) = remove_leftover(
                                context.docker,
                                self.options.engine_timeout,
                                &leftover,
                            )
                            .await
                            {
                                // Tried again by the next call, at the
                                // client's drop, or by the next start's sweep.
                                warnings.push(e);
                                pooled.keep_leftover(owner, leftover);
                            }
                            outages += 1;
                            if outages > MAX_OUTAGE_RERUNS {
                                let reason = format!(
                                    "{lost}; it was run {outages} times and lost each time"
                                );
                                return Ok((result.event, Some(reason)));
                            }
                            warnings.push(format!("{lost}; run again once it answered"));
                        }
                        Err(unavailable) => {
                            pooled.keep_leftover(owner, leftover);
                            return match unavailable {
                                Unavailable::GaveUp(message) => {
                                    Err(CallFault::Unavailable(SandboxError::EngineUnavailable {
                                        message,
                                    }))
                                }
                                Unavailable::Cancelled => Ok((
                                    InvocationEvent::not_run("the call was cancelled"),
                                    Some("the call was cancelled".into()),
                                )),
                            };
                        }
                    }
                }
            }
        }
    }
}

fn sandbox_message(event: &InvocationEvent) -> String {
    match &event.outcome {
        Outcome::SandboxError { message } => message.clone(),
        other => other.kind().to_string(),
    }
}
