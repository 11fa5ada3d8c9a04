//! Which invocations a container backend traces, and what it records when
//! it cannot: a profile that asks for a trace never gets an empty one.

use progscore_sandbox::{Behaviour, PathPattern, RuntimeProfile, Stage};

/// How one invocation's behaviour is recorded.
#[derive(Debug, Clone)]
pub enum TracePlan {
    /// The profile does not trace (or this is its compile, which is the
    /// compiler's behaviour, not the program's): nothing is recorded.
    Off,
    /// The profile traces but this sandbox cannot: the reason is recorded.
    NotTraced(String),
    /// gVisor's runtime monitoring, with these sensitive read paths.
    Gvisor(Vec<PathPattern>),
    /// runc with a seccomp user-notification listener
    /// ([`crate::seccomp_trace`]), with these sensitive read paths.
    Seccomp(Vec<PathPattern>),
}

/// Why a backend that cannot hand runc a seccomp listener (Docker) does
/// not trace runc.
const RUNC_WITHOUT_LISTENER: &str = "runtime `runc` is not traced here: Docker's runc is not \
     traced (the engine cannot hand progscore a seccomp listener); the OCI backend traces runc";

impl TracePlan {
    /// The plan for `profile`'s `stage` under `runtime` (`runsc` traces)
    /// in a backend that cannot hand runc a seccomp listener (Docker: runc
    /// is not traced); `gvisor_usable` says whether this sandbox's runsc
    /// can stream a trace to this host (else why not).
    pub fn of(
        profile: &RuntimeProfile,
        stage: Stage,
        runtime: &str,
        gvisor_usable: Result<(), String>,
    ) -> TracePlan {
        TracePlan::plan(
            profile,
            stage,
            runtime,
            gvisor_usable,
            Err(RUNC_WITHOUT_LISTENER.to_string()),
        )
    }

    /// As [`TracePlan::of`], in a backend that starts runc itself and gives
    /// its container a seccomp listener (OCI): runc is traced too.
    pub fn with_runc_listener(
        profile: &RuntimeProfile,
        stage: Stage,
        runtime: &str,
        gvisor_usable: Result<(), String>,
    ) -> TracePlan {
        TracePlan::plan(profile, stage, runtime, gvisor_usable, Ok(()))
    }

    fn plan(
        profile: &RuntimeProfile,
        stage: Stage,
        runtime: &str,
        gvisor_usable: Result<(), String>,
        runc_listener: Result<(), String>,
    ) -> TracePlan {
        let Some(settings) = &profile.trace else {
            return TracePlan::Off;
        };
        if stage == Stage::Compile {
            return TracePlan::Off;
        }
        if runtime == "runc" {
            return match runc_listener {
                Ok(()) => TracePlan::Seccomp(settings.sensitive_patterns()),
                Err(why) => TracePlan::NotTraced(why),
            };
        }
        if runtime != "runsc" {
            return TracePlan::NotTraced(format!(
                "runtime `{runtime}` does not trace behaviour: only gVisor (runtime `runsc`) and, \
                 on the OCI backend, runc record what a program tried"
            ));
        }
        match gvisor_usable {
            Ok(()) => TracePlan::Gvisor(settings.sensitive_patterns()),
            Err(why) => TracePlan::NotTraced(why),
        }
    }

    /// What `doctor` says of a traced profile's cases under this plan, as a
    /// run would record it; `None` for a profile that does not trace.
    pub fn describe(&self) -> Option<String> {
        match self {
            TracePlan::Off => None,
            TracePlan::NotTraced(why) => Some(format!("behaviour not traced: {why}")),
            TracePlan::Gvisor(_) | TracePlan::Seccomp(_) => Some("behaviour traced".into()),
        }
    }

    /// What an invocation that was never traced records under this plan
    /// (the sandbox failed before the trace began, or the plan says no).
    pub fn untraced(&self, why: &str) -> Option<Behaviour> {
        match self {
            TracePlan::Off => None,
            TracePlan::NotTraced(reason) => Some(Behaviour::not_traced(reason.clone())),
            TracePlan::Gvisor(_) | TracePlan::Seccomp(_) => {
                Some(Behaviour::not_traced(why.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn profile(trace: bool) -> RuntimeProfile {
        let spec = serde_json::json!({
            "backend": "oci",
            "image": format!("127.0.0.1:5000/p@sha256:{}", "a".repeat(64)),
            "command": ["python3"],
            "trace": trace,
        });
        RuntimeProfile::from_spec("p", &serde_json::from_value(spec).unwrap(), Path::new("."))
            .unwrap()
    }

    #[test]
    fn a_traced_profile_is_traced_by_runsc_and_says_why_elsewhere() {
        assert!(matches!(
            TracePlan::of(&profile(false), Stage::Case, "runsc", Ok(())),
            TracePlan::Off
        ));
        assert!(matches!(
            TracePlan::of(&profile(true), Stage::Compile, "runsc", Ok(())),
            TracePlan::Off
        ));
        let TracePlan::Gvisor(sensitive) =
            TracePlan::of(&profile(true), Stage::Case, "runsc", Ok(()))
        else {
            panic!("runsc traces");
        };
        assert!(sensitive.iter().any(|p| p.matches("/etc/shadow")));
        let runc = TracePlan::of(&profile(true), Stage::Case, "runc", Ok(()));
        assert!(matches!(
            runc.untraced("unused"),
            Some(Behaviour::NotTraced { reason })
                if reason.contains("runtime `runc`") && reason.contains("Docker's runc")
        ));
        // A backend that hands runc a seccomp listener traces it.
        let TracePlan::Seccomp(sensitive) =
            TracePlan::with_runc_listener(&profile(true), Stage::Case, "runc", Ok(()))
        else {
            panic!("the OCI backend traces runc");
        };
        assert!(sensitive.iter().any(|p| p.matches("/etc/shadow")));
        assert!(matches!(
            TracePlan::with_runc_listener(&profile(true), Stage::Compile, "runc", Ok(())),
            TracePlan::Off
        ));
        assert!(matches!(
            TracePlan::with_runc_listener(&profile(true), Stage::Case, "runsc", Ok(())),
            TracePlan::Gvisor(_)
        ));
        let crun = TracePlan::with_runc_listener(&profile(true), Stage::Case, "crun", Ok(()));
        assert!(matches!(
            crun.untraced("unused"),
            Some(Behaviour::NotTraced { reason }) if reason.contains("runtime `crun`")
        ));
        let remote = TracePlan::of(
            &profile(true),
            Stage::Case,
            "runsc",
            Err("the engine is on another host".into()),
        );
        assert!(matches!(
            remote.untraced("unused"),
            Some(Behaviour::NotTraced { reason }) if reason == "the engine is on another host"
        ));
    }
}
