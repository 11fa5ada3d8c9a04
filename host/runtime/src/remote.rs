//! Running programs on other machines' backends (the Python package's Ray
//! driver): the request and reply as they travel, the node side that answers
//! a request from its own backends, and a [`SandboxClient`] for the driver
//! that hands each request to a dispatcher and awaits the reply.
//!
//! The driver keeps the scorer and the store: attempt keys, observation ids
//! and verdicts are made there exactly as for a local run, so a node only
//! ever returns a [`ProgramRun`] (or why not), never evidence or a score.
//! The dispatcher is outside progscore (Python, Ray): it takes requests from
//! a [`Desk`] when woken, and answers each by id. progscore's threads never
//! call it; they only post and wake.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use progscore_sandbox::{
    BoxFuture, ByteString, InteractorRequest, Invocation, Limits, Preflight, ProgramFiles,
    ProgramRun, RunProfile, RunRequest, RuntimeProfile, SandboxClient, SandboxError,
};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// What a driver asks of a node.
// Made once per program and written out at once: the size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RemoteRequest {
    /// Run `program` once per invocation under the node's profile of this
    /// name, with these limits (the profile's own, or a program's own).
    Execute {
        profile: String,
        program: ByteString,
        limits: Limits,
        /// The compile's limits, for a profile that compiles.
        #[serde(default)]
        compile_limits: Option<Limits>,
        #[serde(default)]
        files: ProgramFiles,
        invocations: Vec<Invocation>,
        /// An interactive request's interactor: the node runs both sides
        /// (a conversation is not joined across machines).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interactor: Option<Box<RemoteInteractor>>,
    },
    /// Check the node's profile of this name before anything runs.
    Preflight { profile: String },
}

/// The interactor of an interactive [`RemoteRequest::Execute`], under the
/// node's profile of this name with these limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteInteractor {
    pub profile: String,
    pub program: ByteString,
    pub limits: Limits,
    #[serde(default)]
    pub compile_limits: Option<Limits>,
    #[serde(default)]
    pub files: ProgramFiles,
    pub invocations: Vec<Invocation>,
}

/// The node's profile `name` with these limits, or why not.
fn node_variant(
    client: &dyn SandboxClient,
    name: &str,
    limits: Limits,
    compile_limits: Option<Limits>,
) -> Result<RuntimeProfile, SandboxError> {
    let Some(own) = client.profile(name) else {
        return Err(SandboxError::unknown_profile(name, client.profiles()));
    };
    let mut variant = own.clone();
    variant.limits = limits;
    if let (Some(step), Some(limits)) = (variant.compile.as_mut(), compile_limits) {
        step.limits = limits;
    }
    Ok(variant)
}

impl RemoteRequest {
    /// The profile the request is for.
    pub fn profile(&self) -> &str {
        match self {
            RemoteRequest::Execute { profile, .. } | RemoteRequest::Preflight { profile } => {
                profile
            }
        }
    }
}

/// A node's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RemoteReply {
    /// The program ran: one event per invocation.
    Run { run: Box<ProgramRun> },
    /// The profile can run on the node: its fingerprint as the node resolved
    /// it (attempt keys derive from it) and what was checked.
    Preflight {
        fingerprint: serde_json::Value,
        detail: String,
    },
    /// Refused before anything of the program's behaviour was known.
    Refused { message: String, transient: bool },
}

impl RemoteReply {
    fn refused(error: &SandboxError) -> RemoteReply {
        RemoteReply::Refused {
            message: error.to_string(),
            transient: error.is_transient(),
        }
    }
}

/// Answers `request` from this node's own backends (`client`): the node's
/// profile of that name, with the request's limits, runs the program.
pub async fn serve(client: &dyn SandboxClient, request: RemoteRequest) -> RemoteReply {
    match request {
        RemoteRequest::Preflight { profile } => match client.preflight(&profile).await {
            Ok(found) => RemoteReply::Preflight {
                fingerprint: found.fingerprint,
                detail: found.detail,
            },
            Err(error) => RemoteReply::refused(&error),
        },
        RemoteRequest::Execute {
            profile,
            program,
            limits,
            compile_limits,
            files,
            invocations,
            interactor,
        } => {
            let variant = match node_variant(client, &profile, limits, compile_limits) {
                Ok(variant) => variant,
                Err(error) => return RemoteReply::refused(&error),
            };
            let interactor = match interactor {
                None => None,
                Some(interactor) => {
                    let RemoteInteractor {
                        profile,
                        program,
                        limits,
                        compile_limits,
                        files,
                        invocations,
                    } = *interactor;
                    match node_variant(client, &profile, limits, compile_limits) {
                        Ok(variant) => Some((variant, program, files, invocations)),
                        Err(error) => return RemoteReply::refused(&error),
                    }
                }
            };
            let mut request =
                RunRequest::variant(program.as_bytes(), &variant, &invocations).with_files(&files);
            if let Some((variant, program, files, invocations)) = &interactor {
                request = request.with_interactor(InteractorRequest {
                    program: program.as_bytes(),
                    profile: RunProfile::Variant(variant),
                    files,
                    invocations,
                });
            }
            match client.run(request).await {
                Ok(run) => RemoteReply::Run { run: Box::new(run) },
                Err(error) => RemoteReply::refused(&error),
            }
        }
    }
}

/// What the dispatcher takes from the desk.
#[derive(Debug, Clone, PartialEq)]
pub enum Posted {
    /// A new request (JSON of [`RemoteRequest`]), to answer by its id.
    Request { id: u64, request: String },
    /// The caller stopped waiting for this request (its score was
    /// cancelled): stop its run; an answer is no longer read.
    Cancelled { id: u64 },
}

/// Where requests wait for the dispatcher, and answers for their callers.
pub struct Desk {
    state: Mutex<DeskState>,
    /// Tells the dispatcher that something was posted (never blocks, never
    /// calls into the dispatcher's language).
    wake: Box<dyn Fn() + Send + Sync>,
}

#[derive(Default)]
struct DeskState {
    next_id: u64,
    posted: Vec<Posted>,
    waiting: HashMap<u64, oneshot::Sender<RemoteReply>>,
}

impl Desk {
    /// A desk that calls `wake` whenever it posts.
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Arc<Desk> {
        Arc::new(Desk {
            state: Mutex::new(DeskState::default()),
            wake: Box::new(wake),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, DeskState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Everything posted since the last call, in order.
    pub fn take_posted(&self) -> Vec<Posted> {
        std::mem::take(&mut self.state().posted)
    }

    /// Answers request `id` with a reply (JSON of [`RemoteReply`], as a node
    /// wrote it: an unreadable reply refuses the request, it is never read
    /// as a run). Returns whether a caller was still waiting.
    pub fn answer(&self, id: u64, reply: &str) -> bool {
        let reply = serde_json::from_str(reply).unwrap_or_else(|e| RemoteReply::Refused {
            message: format!("a node's reply could not be read ({e}); nothing of it was used"),
            transient: true,
        });
        self.answer_with(id, reply)
    }

    /// Answers request `id` with a refusal (no node could run it).
    pub fn refuse(&self, id: u64, message: String, transient: bool) -> bool {
        self.answer_with(id, RemoteReply::Refused { message, transient })
    }

    fn answer_with(&self, id: u64, reply: RemoteReply) -> bool {
        let sender = self.state().waiting.remove(&id);
        sender.is_some_and(|sender| sender.send(reply).is_ok())
    }

    /// Posts `request` and waits for its answer; dropping the future posts
    /// its cancellation.
    async fn ask(self: &Arc<Desk>, request: &RemoteRequest) -> Result<RemoteReply, SandboxError> {
        let text = serde_json::to_string(request).map_err(|e| SandboxError::Setup {
            message: format!("cannot write the request for a node: {e}"),
        })?;
        let (sender, receiver) = oneshot::channel();
        let id = {
            let mut state = self.state();
            state.next_id += 1;
            let id = state.next_id;
            state.waiting.insert(id, sender);
            state.posted.push(Posted::Request { id, request: text });
            id
        };
        (self.wake)();
        let mut pending = PendingAnswer {
            desk: self.clone(),
            id,
            answered: false,
        };
        let reply = receiver.await;
        pending.answered = true;
        reply.map_err(|_| SandboxError::Remote {
            message: "the dispatcher stopped before it answered".into(),
            transient: true,
        })
    }
}

/// A request still waiting: dropped unanswered, it is cancelled.
struct PendingAnswer {
    desk: Arc<Desk>,
    id: u64,
    answered: bool,
}

impl Drop for PendingAnswer {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        {
            let mut state = self.desk.state();
            state.waiting.remove(&self.id);
            state.posted.push(Posted::Cancelled { id: self.id });
        }
        (self.desk.wake)();
    }
}

/// A [`SandboxClient`] whose programs run elsewhere: every request goes
/// through a [`Desk`] to a dispatcher, which sends it to a node.
pub struct RemoteClient {
    profiles: Vec<RuntimeProfile>,
    desk: Arc<Desk>,
}

impl RemoteClient {
    /// A client for these profiles (the nodes must have the same ones).
    pub fn new(profiles: Vec<RuntimeProfile>, desk: Arc<Desk>) -> RemoteClient {
        RemoteClient { profiles, desk }
    }

    async fn run_remote(
        &self,
        program: &[u8],
        variant: &RuntimeProfile,
        files: &ProgramFiles,
        invocations: &[Invocation],
        interactor: Option<Box<RemoteInteractor>>,
    ) -> Result<ProgramRun, SandboxError> {
        let own = self
            .profile(&variant.name)
            .ok_or_else(|| SandboxError::unknown_profile(&variant.name, &self.profiles))?;
        SandboxError::check_variant(own, variant)?;
        let request = RemoteRequest::Execute {
            profile: variant.name.clone(),
            program: ByteString(program.to_vec()),
            limits: variant.limits.clone(),
            compile_limits: variant.compile.as_ref().map(|step| step.limits.clone()),
            files: files.clone(),
            invocations: invocations.to_vec(),
            interactor,
        };
        match self.desk.ask(&request).await? {
            RemoteReply::Run { run } if run.profile == variant.name => Ok(*run),
            RemoteReply::Refused { message, transient } => {
                Err(SandboxError::Remote { message, transient })
            }
            other => Err(unexpected(&request, &other)),
        }
    }
}

/// A reply that does not answer its request: the request is refused, the
/// reply is not used.
fn unexpected(request: &RemoteRequest, reply: &RemoteReply) -> SandboxError {
    let what = match reply {
        RemoteReply::Run { run } => format!("a run of profile `{}`", run.profile),
        RemoteReply::Preflight { .. } => "a preflight".into(),
        RemoteReply::Refused { .. } => "a refusal".into(),
    };
    SandboxError::Remote {
        message: format!(
            "a node answered a request for profile `{}` with {what}; nothing of it was used",
            request.profile()
        ),
        transient: true,
    }
}

impl SandboxClient for RemoteClient {
    fn profiles(&self) -> Vec<&RuntimeProfile> {
        self.profiles.iter().collect()
    }

    /// The node runs the whole request and answers once: its cases are
    /// not told early (`on_case` hears nothing).
    fn run<'a>(
        &'a self,
        request: RunRequest<'a>,
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        Box::pin(async move {
            let variant = match request.profile {
                RunProfile::Named(name) => self
                    .profile(name)
                    .ok_or_else(|| SandboxError::unknown_profile(name, &self.profiles))?,
                RunProfile::Variant(variant) => variant,
            };
            // A side of a conversation is never sent alone: the node runs
            // the whole of an interactive request.
            if request.conversation.is_some() {
                return Err(SandboxError::InteractiveUnsupported {
                    profile: variant.name.clone(),
                });
            }
            let interactor = match request.interactor {
                None => None,
                Some(interactor) => {
                    let profile = match interactor.profile {
                        RunProfile::Named(name) => self
                            .profile(name)
                            .ok_or_else(|| SandboxError::unknown_profile(name, &self.profiles))?,
                        RunProfile::Variant(variant) => variant,
                    };
                    let own = self.profile(&profile.name).ok_or_else(|| {
                        SandboxError::unknown_profile(&profile.name, &self.profiles)
                    })?;
                    SandboxError::check_variant(own, profile)?;
                    Some(Box::new(RemoteInteractor {
                        profile: profile.name.clone(),
                        program: ByteString(interactor.program.to_vec()),
                        limits: profile.limits.clone(),
                        compile_limits: profile.compile.as_ref().map(|step| step.limits.clone()),
                        files: interactor.files.clone(),
                        invocations: interactor.invocations.to_vec(),
                    }))
                }
            };
            self.run_remote(
                request.program,
                variant,
                request.files,
                request.invocations,
                interactor,
            )
            .await
        })
    }

    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<Preflight, SandboxError>> {
        Box::pin(async move {
            if self.profile(profile).is_none() {
                return Err(SandboxError::unknown_profile(profile, &self.profiles));
            }
            let request = RemoteRequest::Preflight {
                profile: profile.to_string(),
            };
            match self.desk.ask(&request).await? {
                RemoteReply::Preflight {
                    fingerprint,
                    detail,
                } => Ok(Preflight {
                    fingerprint,
                    detail,
                }),
                RemoteReply::Refused { message, transient } => {
                    Err(SandboxError::Remote { message, transient })
                }
                other => Err(unexpected(&request, &other)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use progscore_sandbox::SandboxClientExt as _;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn profile() -> RuntimeProfile {
        let spec: progscore_sandbox::ProfileSpec = serde_json::from_value(serde_json::json!({
            "backend": "docker",
            "image": "sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "command": ["python3"],
        }))
        .unwrap();
        RuntimeProfile::from_spec("py", &spec, std::path::Path::new(".")).unwrap()
    }

    fn desk() -> (Arc<Desk>, Arc<AtomicUsize>) {
        let wakes = Arc::new(AtomicUsize::new(0));
        let counter = wakes.clone();
        let desk = Desk::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        (desk, wakes)
    }

    #[tokio::test]
    async fn a_request_is_posted_and_its_answer_returned() {
        let (desk, wakes) = desk();
        let client = RemoteClient::new(vec![profile()], desk.clone());
        let invocations = vec![Invocation::default()];
        let asking = client.execute(b"print(1)", "py", &invocations);
        let dispatcher = async {
            loop {
                tokio::task::yield_now().await;
                if let Some(Posted::Request { id, request }) = desk.take_posted().pop() {
                    let request: RemoteRequest = serde_json::from_str(&request).unwrap();
                    assert!(
                        matches!(&request, RemoteRequest::Execute { program, .. } if program.as_bytes() == b"print(1)")
                    );
                    let refusal =
                        r#"{"kind":"refused","message":"node a: engine away","transient":true}"#;
                    assert!(desk.answer(id, refusal));
                    break;
                }
            }
        };
        let (result, ()) = tokio::join!(asking, dispatcher);
        assert_eq!(
            result.unwrap_err(),
            SandboxError::Remote {
                message: "node a: engine away".into(),
                transient: true
            }
        );
        assert_eq!(wakes.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_dropped_request_posts_its_cancellation_and_a_garbled_reply_is_refused() {
        let (desk, _) = desk();
        let client = RemoteClient::new(vec![profile()], desk.clone());
        let invocations = vec![Invocation::default()];
        {
            let mut asking = client.execute(b"x", "py", &invocations);
            // Polled once (posted), then dropped.
            assert!(futures_util::poll!(&mut asking).is_pending());
        }
        let posted = desk.take_posted();
        assert!(matches!(
            posted.as_slice(),
            [Posted::Request { id: 1, .. }, Posted::Cancelled { id: 1 }]
        ));
        assert!(
            !desk.answer(1, "{}"),
            "nobody waits for a cancelled request"
        );

        let asking = client.preflight("py");
        let dispatcher = async {
            loop {
                tokio::task::yield_now().await;
                if let Some(Posted::Request { id, .. }) = desk.take_posted().pop() {
                    desk.answer(id, "\u{0}garbage");
                    break;
                }
            }
        };
        let (result, ()) = tokio::join!(asking, dispatcher);
        let error = result.unwrap_err();
        assert!(error.is_transient(), "{error}");
        assert!(error.to_string().contains("could not be read"), "{error}");
    }

    #[tokio::test]
    async fn a_node_runs_both_sides_of_an_interactive_request() {
        let fake = progscore_sandbox::fake::ScriptedClient::new(vec![profile()]).with_responder(
            |request| {
                let interactor = request
                    .interactor
                    .as_ref()
                    .expect("the interactor came along");
                assert_eq!(interactor.program, b"judge");
                assert_eq!(interactor.invocations[0].args, ["case-0/input"]);
                assert_eq!(interactor.limits.timeout_ms, 9000);
                Ok(vec![progscore_sandbox::fake::exited_event(
                    0, b"? 1\n", b"",
                )])
            },
        );
        let mut limits = profile().limits;
        limits.timeout_ms = 9000;
        let request = RemoteRequest::Execute {
            profile: "py".into(),
            program: ByteString(b"print(1)".to_vec()),
            limits: profile().limits,
            compile_limits: None,
            files: ProgramFiles::default(),
            invocations: vec![Invocation::default()],
            interactor: Some(Box::new(RemoteInteractor {
                profile: "py".into(),
                program: ByteString(b"judge".to_vec()),
                limits,
                compile_limits: None,
                files: ProgramFiles::default(),
                invocations: vec![Invocation::with_args(["case-0/input"])],
            })),
        };
        let text = serde_json::to_string(&request).unwrap();
        let reply = serve(&fake, serde_json::from_str(&text).unwrap()).await;
        let RemoteReply::Run { run } = reply else {
            panic!("{reply:?}")
        };
        assert!(
            run.interaction.is_some(),
            "the interactor's side comes back"
        );
    }

    #[tokio::test]
    async fn a_node_serves_a_request_from_its_own_profile_with_the_requests_limits() {
        let fake = progscore_sandbox::fake::ScriptedClient::new(vec![profile()]).with_responder(
            |request| {
                assert_eq!(
                    request.limits.timeout_ms, 7000,
                    "the request's limits apply"
                );
                Ok(vec![progscore_sandbox::fake::exited_event(0, b"1\n", b"")])
            },
        );
        let mut limits = profile().limits;
        limits.timeout_ms = 7000;
        let request = RemoteRequest::Execute {
            interactor: None,
            profile: "py".into(),
            program: ByteString(b"print(1)".to_vec()),
            limits: limits.clone(),
            compile_limits: None,
            files: ProgramFiles::default(),
            invocations: vec![Invocation::default()],
        };
        let text = serde_json::to_string(&request).unwrap();
        let reply = serve(&fake, serde_json::from_str(&text).unwrap()).await;
        let RemoteReply::Run { run } = reply else {
            panic!("{reply:?}")
        };
        assert_eq!(run.profile, "py");
        assert_eq!(run.events[0].stdout.data.as_bytes(), b"1\n");
        let unknown = RemoteRequest::Preflight {
            profile: "nope".into(),
        };
        let reply = serve(&fake, unknown).await;
        assert!(
            matches!(&reply, RemoteReply::Refused { message, transient: false } if message.contains("unknown profile `nope`")),
            "{reply:?}"
        );
    }
}
