//! [`ComparatorHost`]: the engine, the registered comparators and checkers,
//! and calls.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use wasmtime::component::Linker;
use wasmtime::{Engine, Store, Trap};

use crate::cache::ComponentCache;
use crate::guest::GuestState;
use crate::options::HostOptions;
use crate::runtime::{
    EPOCH_TICK, Slots, cap_reason, new_engine, new_linker, run_now, sha256_hex, start_ticker,
};
use crate::{CheckOutcome, ComparatorError, ComparisonOutcome, ObservedBehaviour, ObservedStream};

/// `progscore:comparator@0.1.0`: a stream and parameters.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit/comparator@0.1.0",
        world: "comparator",
        exports: { default: async },
    });
}

/// `progscore:comparator@0.2.0`: 0.1.0 and the invocation's behaviour.
mod bindings_v2 {
    wasmtime::component::bindgen!({
        path: "../../wit/comparator@0.2.0",
        world: "comparator",
        exports: { default: async },
    });
}

/// `progscore:checker@0.1.0`: the test's input, output and answer.
mod bindings_checker {
    wasmtime::component::bindgen!({
        path: "../../wit/checker@0.1.0",
        world: "checker",
        exports: { default: async },
    });
}

/// A registered component, by the world (and version) it exports.
enum Pre {
    V1(bindings::ComparatorPre<GuestState>),
    V2(bindings_v2::ComparatorPre<GuestState>),
    Checker(bindings_checker::CheckerPre<GuestState>),
}

impl Pre {
    fn role(&self) -> ComparatorRole {
        match self {
            Pre::V1(_) | Pre::V2(_) => ComparatorRole::Comparator,
            Pre::Checker(_) => ComparatorRole::Checker,
        }
    }
}

/// A verdict from either version.
enum AnyVerdict {
    Match,
    Mismatch(String),
    Undetermined(String),
}

impl From<bindings::Verdict> for AnyVerdict {
    fn from(verdict: bindings::Verdict) -> AnyVerdict {
        match verdict {
            bindings::Verdict::Match => AnyVerdict::Match,
            bindings::Verdict::Mismatch(reason) => AnyVerdict::Mismatch(reason),
            bindings::Verdict::Undetermined(reason) => AnyVerdict::Undetermined(reason),
        }
    }
}

impl From<bindings_v2::Verdict> for AnyVerdict {
    fn from(verdict: bindings_v2::Verdict) -> AnyVerdict {
        match verdict {
            bindings_v2::Verdict::Match => AnyVerdict::Match,
            bindings_v2::Verdict::Mismatch(reason) => AnyVerdict::Mismatch(reason),
            bindings_v2::Verdict::Undetermined(reason) => AnyVerdict::Undetermined(reason),
        }
    }
}

fn behaviour_v2(behaviour: &ObservedBehaviour) -> bindings_v2::Behaviour {
    use bindings_v2::progscore::comparator::types as wit;
    match behaviour {
        ObservedBehaviour::Absent => wit::Behaviour::Absent,
        ObservedBehaviour::NotTraced(reason) => wit::Behaviour::NotTraced(reason.clone()),
        ObservedBehaviour::Traced(trace) => wit::Behaviour::Traced(wit::BehaviourTrace {
            traced_kinds: trace.traced_kinds.clone(),
            events: trace
                .events
                .iter()
                .map(|event| wit::BehaviourEvent {
                    kind: event.kind.clone(),
                    at_ms: event.at_ms,
                    outcome: event.result.clone(),
                    json: event.json.clone(),
                })
                .collect(),
            counts: trace
                .counts
                .iter()
                .map(|(kind, count)| wit::KindCount {
                    kind: kind.clone(),
                    count: *count,
                })
                .collect(),
            dropped: trace.dropped,
            incomplete: trace.incomplete.clone(),
            arguments_unverified: trace.arguments_unverified.clone(),
        }),
    }
}

/// Where a registered comparator came from. Serializes as
/// `{"kind": "builtin"}` or `{"kind": "user", "path": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ComparatorSource {
    /// Shipped inside progscore.
    Builtin,
    /// Loaded from a file pinned in the configuration.
    User {
        /// The file it was loaded from.
        path: PathBuf,
    },
}

/// What a registered component does. Serializes as `"comparator"` or
/// `"checker"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ComparatorRole {
    /// Exports `progscore:comparator` (0.2.0 or 0.1.0): judges one output
    /// stream against parameters ([`ComparatorHost::compare`]).
    Comparator,
    /// Exports `progscore:checker@0.1.0`: judges a test's output given its
    /// input and answer ([`ComparatorHost::check`]).
    Checker,
}

impl std::fmt::Display for ComparatorRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ComparatorRole::Comparator => "comparator",
            ComparatorRole::Checker => "checker",
        })
    }
}

/// A registered comparator or checker, for listing. Serializes flat:
/// `{"name": "equals", "kind": "builtin", "sha256": "...", "role": "comparator"}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ComparatorInfo {
    /// The name expectations use.
    pub name: String,
    /// Built-in or user.
    #[serde(flatten)]
    pub source: ComparatorSource,
    /// sha256 of the component, in hex.
    pub sha256: String,
    /// Comparator or checker.
    pub role: ComparatorRole,
}

struct Registered {
    info: ComparatorInfo,
    pre: Pre,
    /// For a built-in checker: the `mode` its name stands for, added to the
    /// caller's parameters.
    mode: Option<&'static str>,
}

/// Runs comparators and checkers. Create one per process, register the
/// built-ins and the configured user components, then share it (`Arc`)
/// between threads: `validate`, `compare`, `validate_checker` and `check`
/// take `&self`, are synchronous CPU work bounded by
/// [`HostOptions::call_timeout`], and never block on I/O (from async code, call
/// them in `spawn_blocking` so a slow comparator does not stall the runtime).
pub struct ComparatorHost {
    engine: Engine,
    linker: Linker<GuestState>,
    cache: ComponentCache,
    comparators: BTreeMap<String, Registered>,
    options: HostOptions,
    deadline_ticks: u64,
    slots: Slots,
    warnings: Vec<String>,
}

impl ComparatorHost {
    /// Creates the engine (with its deadline ticker thread) and the WASI
    /// linker. No comparator is registered yet.
    pub fn new(options: HostOptions) -> Result<ComparatorHost, ComparatorError> {
        let engine = new_engine(&options)?;
        let linker = new_linker(&engine)?;
        let cache = ComponentCache::new(&engine, options.cache_dir.clone())?;
        start_ticker(engine.weak())?;
        let deadline_ticks = options
            .call_timeout
            .as_millis()
            .div_ceil(EPOCH_TICK.as_millis());
        Ok(ComparatorHost {
            slots: Slots::new(options.max_concurrent_calls.max(1)),
            engine,
            linker,
            cache,
            comparators: BTreeMap::new(),
            deadline_ticks: u64::try_from(deadline_ticks).unwrap_or(u64::MAX).max(1),
            options,
            warnings: Vec::new(),
        })
    }

    /// Registers every built-in comparator (`equals`, `contains`, `regex`,
    /// `json`, `number`, `lines`) and every built-in checker (see
    /// [`ComparatorHost::register_builtin_checkers`]), compiling them or
    /// loading them from the cache.
    pub fn register_builtins(&mut self) -> Result<(), ComparatorError> {
        for (name, bytes) in crate::guests::BUILTINS {
            self.register(name, bytes, ComparatorSource::Builtin)?;
        }
        self.register_builtin_checkers()
    }

    /// Registers the built-in checkers (`tokens`, `yes_no`, `floats`,
    /// `sorted_tokens`, `unordered_tokens`, `exact_lines`): one component,
    /// compiled once, under each name; a call adds `"mode": NAME` to the
    /// caller's parameters (which must be a JSON object without `mode`).
    /// [`ComparatorHost::register_builtins`] calls this already; calling both
    /// is refused as a duplicate.
    pub fn register_builtin_checkers(&mut self) -> Result<(), ComparatorError> {
        for (folder, bytes) in crate::guests::BUILTIN_CHECKERS {
            let names: Vec<&'static str> = crate::guests::BUILTIN_CHECKER_NAMES
                .iter()
                .filter(|(_, f)| f == folder)
                .map(|(name, _)| *name)
                .collect();
            if let Some(name) = names.iter().find(|n| self.comparators.contains_key(**n)) {
                return Err(ComparatorError::Duplicate(name.to_string()));
            }
            let (pre, sha256) = self.load(&format!("builtin-{folder}"), bytes)?;
            let Pre::Checker(pre) = pre else {
                return Err(ComparatorError::NotAComparator {
                    name: folder.to_string(),
                    message: "the built-in checker component exports a comparator world"
                        .to_string(),
                });
            };
            for name in names {
                self.insert(
                    name,
                    Registered {
                        info: ComparatorInfo {
                            name: name.to_string(),
                            source: ComparatorSource::Builtin,
                            sha256: sha256.clone(),
                            role: ComparatorRole::Checker,
                        },
                        pre: Pre::Checker(pre.clone()),
                        mode: Some(name),
                    },
                );
            }
        }
        Ok(())
    }

    /// Registers the user comparator or checker `name` from `path` (its role
    /// is the world it exports), refusing the file unless its sha256 is
    /// `expected_sha256` (hex, as in the configuration).
    pub fn register_user(
        &mut self,
        name: &str,
        path: impl AsRef<Path>,
        expected_sha256: &str,
    ) -> Result<(), ComparatorError> {
        let path = path.as_ref();
        let expected = expected_sha256.trim().to_ascii_lowercase();
        if expected.len() != 64 || !expected.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ComparatorError::BadPin {
                name: name.to_string(),
                pin: expected_sha256.to_string(),
            });
        }
        if self.comparators.contains_key(name) {
            return Err(ComparatorError::Duplicate(name.to_string()));
        }
        let bytes = std::fs::read(path).map_err(|source| ComparatorError::Read {
            name: name.to_string(),
            path: path.to_path_buf(),
            cause: source,
        })?;
        let actual = sha256_hex(&bytes);
        if actual != expected {
            return Err(ComparatorError::PinMismatch {
                name: name.to_string(),
                path: path.to_path_buf(),
                expected,
                actual,
            });
        }
        self.register(
            name,
            &bytes,
            ComparatorSource::User {
                path: path.to_path_buf(),
            },
        )
    }

    /// Names of the registered comparators and checkers, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.comparators.keys().map(String::as_str).collect()
    }

    /// Whether `name` is a registered checker (false for a comparator or an
    /// unknown name).
    pub fn is_checker(&self, name: &str) -> bool {
        self.comparators
            .get(name)
            .is_some_and(|r| r.info.role == ComparatorRole::Checker)
    }

    /// The registered comparators and checkers, sorted by name.
    pub fn comparators(&self) -> Vec<ComparatorInfo> {
        self.comparators.values().map(|r| r.info.clone()).collect()
    }

    /// Problems that did not stop the host (e.g. a compiled comparator that
    /// could not be written to the cache).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The options the host was created with.
    pub fn options(&self) -> &HostOptions {
        &self.options
    }

    /// Asks comparator `name` whether `params_json` are valid parameters.
    /// A checker's name is refused ([`ComparatorError::WrongRole`]): see
    /// [`ComparatorHost::validate_checker`].
    pub fn validate(&self, name: &str, params_json: &str) -> Result<(), ComparatorError> {
        let registered = self.get_as(name, ComparatorRole::Comparator)?;
        self.validate_registered(name, registered, params_json)
    }

    /// Asks checker `name` whether `params_json` are valid parameters. For a
    /// built-in checker they must be a JSON object without `mode` (its name
    /// sets it). A comparator's name is refused
    /// ([`ComparatorError::WrongRole`]).
    pub fn validate_checker(&self, name: &str, params_json: &str) -> Result<(), ComparatorError> {
        let registered = self.get_as(name, ComparatorRole::Checker)?;
        let params = checker_params(name, registered.mode, params_json)?;
        self.validate_registered(name, registered, &params)
    }

    /// Runs checker `name` with `params_json` on one test: the program's
    /// `input`, its `output`, and the jury's `answer`.
    ///
    /// Errors are for the caller's mistakes: an unknown name, a comparator's
    /// name ([`ComparatorError::WrongRole`]), or parameters the checker
    /// refuses. Everything the guest does wrong (trap, deadline, memory cap,
    /// garbage), a `fail` judgement (the checker finds the jury's data
    /// wrong), and points outside [0, 1] are
    /// [`CheckOutcome::Undetermined`], with a reason naming the checker.
    pub fn check(
        &self,
        name: &str,
        params_json: &str,
        input: &[u8],
        output: &ObservedStream,
        answer: &[u8],
    ) -> Result<CheckOutcome, ComparatorError> {
        use bindings_checker::Judgement;
        let registered = self.get_as(name, ComparatorRole::Checker)?;
        let Pre::Checker(pre) = &registered.pre else {
            return Err(wrong_role(name, registered, ComparatorRole::Checker));
        };
        let params = checker_params(name, registered.mode, params_json)?;
        let test = bindings_checker::Test {
            input: input.to_vec(),
            output: bindings_checker::progscore::checker::types::ObservedStream {
                bytes: output.bytes.clone(),
                truncated: output.truncated,
                total_bytes: output.total_bytes,
            },
            answer: answer.to_vec(),
        };
        let _slot = self.slots.acquire();
        let mut store = self.new_store();
        let result = run_now(async {
            let instance = pre.instantiate_async(&mut store).await?;
            instance.call_check(&mut store, &params, &test).await
        });
        Ok(match result {
            Some(Ok(Ok(judgement))) => match judgement {
                Judgement::Accepted(message) => CheckOutcome::Accepted(cap_reason(message)),
                Judgement::WrongAnswer(message) => CheckOutcome::WrongAnswer(cap_reason(message)),
                Judgement::PresentationError(message) => {
                    CheckOutcome::PresentationError(cap_reason(message))
                }
                Judgement::Points(points) if (0.0..=1.0).contains(&points.score) => {
                    CheckOutcome::Points {
                        score: points.score,
                        message: cap_reason(points.message),
                    }
                }
                Judgement::Points(points) => CheckOutcome::Undetermined(cap_reason(format!(
                    "checker \"{name}\" returned points {}, outside [0, 1]: {}",
                    points.score, points.message
                ))),
                Judgement::Fail(message) => CheckOutcome::Undetermined(cap_reason(format!(
                    "checker \"{name}\" says FAIL (the test's data is wrong): {message}"
                ))),
                Judgement::Undetermined(message) => CheckOutcome::Undetermined(cap_reason(message)),
            },
            Some(Ok(Err(message))) => {
                return Err(ComparatorError::InvalidParams {
                    name: name.to_string(),
                    message: cap_reason(message),
                });
            }
            Some(Err(error)) => CheckOutcome::Undetermined(format!(
                "checker \"{name}\" failed: {}",
                self.describe_failure(&store, &error)
            )),
            None => CheckOutcome::Undetermined(format!("checker \"{name}\" {WAITED_CHECKER}")),
        })
    }

    fn validate_registered(
        &self,
        name: &str,
        registered: &Registered,
        params_json: &str,
    ) -> Result<(), ComparatorError> {
        let _slot = self.slots.acquire();
        let mut store = self.new_store();
        let result = run_now(async {
            match &registered.pre {
                Pre::V1(pre) => {
                    let instance = pre.instantiate_async(&mut store).await?;
                    instance.call_validate(&mut store, params_json).await
                }
                Pre::V2(pre) => {
                    let instance = pre.instantiate_async(&mut store).await?;
                    instance.call_validate(&mut store, params_json).await
                }
                Pre::Checker(pre) => {
                    let instance = pre.instantiate_async(&mut store).await?;
                    instance.call_validate(&mut store, params_json).await
                }
            }
        });
        match result {
            Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(message))) => Err(ComparatorError::InvalidParams {
                name: name.to_string(),
                message: cap_reason(message),
            }),
            Some(Err(error)) => Err(ComparatorError::ValidateFailed {
                name: name.to_string(),
                message: self.describe_failure(&store, &error),
            }),
            None => Err(ComparatorError::ValidateFailed {
                name: name.to_string(),
                message: match registered.pre.role() {
                    ComparatorRole::Comparator => WAITED,
                    ComparatorRole::Checker => WAITED_CHECKER,
                }
                .to_string(),
            }),
        }
    }

    /// Runs comparator `name` with `params_json` on `observed`.
    ///
    /// Errors are for the caller's mistakes: an unknown name, a checker's name
    /// ([`ComparatorError::WrongRole`]), or parameters the comparator
    /// refuses. Everything the guest does wrong (trap, deadline,
    /// memory cap, garbage) is [`ComparisonOutcome::Undetermined`] with the
    /// reason.
    pub fn compare(
        &self,
        name: &str,
        params_json: &str,
        observed: &ObservedStream,
    ) -> Result<ComparisonOutcome, ComparatorError> {
        self.compare_in_context(name, params_json, observed, &ObservedBehaviour::Absent)
    }

    /// As [`ComparatorHost::compare`], with the behaviour the sandbox traced
    /// during the invocation: a `progscore:comparator@0.2.0` comparator is
    /// given it, a 0.1.0 one only the stream.
    pub fn compare_in_context(
        &self,
        name: &str,
        params_json: &str,
        observed: &ObservedStream,
        behaviour: &ObservedBehaviour,
    ) -> Result<ComparisonOutcome, ComparatorError> {
        let registered = self.get_as(name, ComparatorRole::Comparator)?;
        let _slot = self.slots.acquire();
        let mut store = self.new_store();
        let result = run_now(async {
            match &registered.pre {
                Pre::V1(pre) => {
                    let stream = bindings::ObservedStream {
                        bytes: observed.bytes.clone(),
                        truncated: observed.truncated,
                        total_bytes: observed.total_bytes,
                    };
                    let instance = pre.instantiate_async(&mut store).await?;
                    let answer = instance
                        .call_compare(&mut store, params_json, &stream)
                        .await?;
                    Ok(answer.map(AnyVerdict::from))
                }
                Pre::V2(pre) => {
                    let stream = bindings_v2::ObservedStream {
                        bytes: observed.bytes.clone(),
                        truncated: observed.truncated,
                        total_bytes: observed.total_bytes,
                    };
                    let behaviour = behaviour_v2(behaviour);
                    let instance = pre.instantiate_async(&mut store).await?;
                    let answer = instance
                        .call_compare(&mut store, params_json, &stream, &behaviour)
                        .await?;
                    Ok(answer.map(AnyVerdict::from))
                }
                // `get_as` refused a checker already.
                Pre::Checker(_) => Err(wasmtime::format_err!("a checker cannot compare")),
            }
        });
        Ok(match result {
            Some(Ok(Ok(AnyVerdict::Match))) => ComparisonOutcome::Match,
            Some(Ok(Ok(AnyVerdict::Mismatch(reason)))) => {
                ComparisonOutcome::Mismatch(cap_reason(reason))
            }
            Some(Ok(Ok(AnyVerdict::Undetermined(reason)))) => {
                ComparisonOutcome::Undetermined(cap_reason(reason))
            }
            Some(Ok(Err(message))) => {
                return Err(ComparatorError::InvalidParams {
                    name: name.to_string(),
                    message: cap_reason(message),
                });
            }
            Some(Err(error)) => ComparisonOutcome::Undetermined(format!(
                "comparator \"{name}\" failed: {}",
                self.describe_failure(&store, &error)
            )),
            None => ComparisonOutcome::Undetermined(format!("comparator \"{name}\" {WAITED}")),
        })
    }

    fn register(
        &mut self,
        name: &str,
        bytes: &[u8],
        source: ComparatorSource,
    ) -> Result<(), ComparatorError> {
        if self.comparators.contains_key(name) {
            return Err(ComparatorError::Duplicate(name.to_string()));
        }
        let (pre, sha256) = self.load(name, bytes)?;
        self.insert(
            name,
            Registered {
                info: ComparatorInfo {
                    name: name.to_string(),
                    source,
                    sha256,
                    role: pre.role(),
                },
                pre,
                mode: None,
            },
        );
        Ok(())
    }

    /// Compiles `bytes` (or loads them from the cache) and links them,
    /// checking which world they export.
    fn load(&mut self, name: &str, bytes: &[u8]) -> Result<(Pre, String), ComparatorError> {
        let sha256 = sha256_hex(bytes);
        let (component, warning) = self.cache.load(&self.engine, name, bytes, &sha256)?;
        self.warnings.extend(warning);
        let not_a_comparator = |e: wasmtime::Error| ComparatorError::NotAComparator {
            name: name.to_string(),
            message: format!("{e:#}"),
        };
        // Linking checks the imports (only WASI is offered); each `*Pre`
        // checks that the exports have that world's types: comparator 0.2.0,
        // else comparator 0.1.0, else checker 0.1.0.
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(not_a_comparator)?;
        let v2 = match bindings_v2::ComparatorPre::new(instance_pre.clone()) {
            Ok(pre) => return Ok((Pre::V2(pre), sha256)),
            Err(e) => e,
        };
        let v1 = match bindings::ComparatorPre::new(instance_pre.clone()) {
            Ok(pre) => return Ok((Pre::V1(pre), sha256)),
            Err(e) => e,
        };
        match bindings_checker::CheckerPre::new(instance_pre) {
            Ok(pre) => Ok((Pre::Checker(pre), sha256)),
            Err(checker) => Err(ComparatorError::NotAComparator {
                name: name.to_string(),
                message: format!(
                    "it exports none of progscore:comparator@0.2.0 ({v2:#}), \
                     progscore:comparator@0.1.0 ({v1:#}), progscore:checker@0.1.0 ({checker:#})"
                ),
            }),
        }
    }

    fn insert(&mut self, name: &str, registered: Registered) {
        self.comparators.insert(name.to_string(), registered);
    }

    /// The registered `name`, refused unless it has the `wanted` role.
    fn get_as(&self, name: &str, wanted: ComparatorRole) -> Result<&Registered, ComparatorError> {
        let registered = self.get(name)?;
        if registered.pre.role() != wanted {
            return Err(wrong_role(name, registered, wanted));
        }
        Ok(registered)
    }

    fn get(&self, name: &str) -> Result<&Registered, ComparatorError> {
        self.comparators
            .get(name)
            .ok_or_else(|| ComparatorError::UnknownComparator {
                name: name.to_string(),
                known: self.names().join(", "),
            })
    }

    fn new_store(&self) -> Store<GuestState> {
        let mut store = Store::new(&self.engine, GuestState::new(self.options.memory_limit));
        store.limiter(|state| &mut state.memory);
        store.set_epoch_deadline(self.deadline_ticks);
        store.epoch_deadline_trap();
        store
    }

    /// A human account of why a call failed, from the error and what the store
    /// saw (memory refusal, stderr).
    fn describe_failure(&self, store: &Store<GuestState>, error: &wasmtime::Error) -> String {
        let state = store.data();
        let mut text = if let Some(desired) = state.memory.denied {
            format!(
                "it exceeded its memory limit of {} MiB (asked for {} MiB)",
                self.options.memory_limit >> 20,
                desired >> 20
            )
        } else if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
            format!("it exited with status {}", exit.0)
        } else {
            match error.downcast_ref::<Trap>() {
                Some(Trap::Interrupt) => format!(
                    "it ran past its deadline of {} ms",
                    self.options.call_timeout.as_millis()
                ),
                Some(trap) => format!("it trapped: {trap}"),
                None => format!("{error:#}"),
            }
        };
        let stderr = state.stderr.text();
        if !stderr.is_empty() {
            text.push_str("; its stderr: ");
            text.push_str(&stderr);
        }
        cap_reason(text)
    }
}

/// Reason given when a guest's call could not finish without waiting on
/// something (which nothing a comparator is given should ever need).
const WAITED: &str = "tried to wait for I/O or time, which comparators may not do";

/// [`WAITED`], for a checker.
const WAITED_CHECKER: &str = "tried to wait for I/O or time, which checkers may not do";

fn wrong_role(name: &str, registered: &Registered, wanted: ComparatorRole) -> ComparatorError {
    ComparatorError::WrongRole {
        name: name.to_string(),
        actual: registered.pre.role(),
        wanted,
    }
}

/// The parameters a checker is called with: the caller's, plus the `mode` of
/// a built-in checker (a caller's own `mode` is refused).
fn checker_params<'a>(
    name: &str,
    mode: Option<&str>,
    params_json: &'a str,
) -> Result<Cow<'a, str>, ComparatorError> {
    let Some(mode) = mode else {
        return Ok(Cow::Borrowed(params_json));
    };
    let invalid = |message: String| ComparatorError::InvalidParams {
        name: name.to_string(),
        message,
    };
    let value: serde_json::Value = serde_json::from_str(params_json)
        .map_err(|e| invalid(format!("parameters are not valid JSON: {e}")))?;
    let serde_json::Value::Object(mut map) = value else {
        return Err(invalid("parameters must be a JSON object".to_string()));
    };
    if map.contains_key("mode") {
        return Err(invalid(format!(
            "parameter \"mode\" may not be given: the built-in checker's name (\"{name}\") sets it"
        )));
    }
    map.insert(
        "mode".to_string(),
        serde_json::Value::String(mode.to_string()),
    );
    Ok(Cow::Owned(serde_json::Value::Object(map).to_string()))
}
