//! Conditions on what a program tried to do (its traced behaviour):
//! `{"never": ["net.connect", {"fs.open": {"path": "/sandbox/**", "access": "write"}}]}`,
//! `{"attempts": ["net.connect"]}`.
//!
//! A recorded event proves a `never` false and an `attempts` true; only a
//! complete trace proves the absence of an action (`never` true, `attempts`
//! false): a trace that does not cover the kind, is incomplete, or dropped
//! events of the kind leaves the condition undetermined.

use std::collections::BTreeMap;

use progscore_sandbox::{
    Action, ActionKind, Behaviour, BehaviourEvent, BehaviourTrace, FileAccess, PathPattern,
};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a program must never do, and what it must attempt.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BehaviourCondition {
    /// Actions no event may show.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub never: Vec<ActionPattern>,
    /// Actions some event must show (a detection test expects the attempt).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<ActionPattern>,
}

impl BehaviourCondition {
    /// Whether it states nothing.
    pub fn is_empty(&self) -> bool {
        self.never.is_empty() && self.attempts.is_empty()
    }
}

/// An action kind, with optional filters on its fields. Written as the
/// kind's name (`"net.connect"`) or `{"KIND": {"path": ..., "access": ...,
/// "address": ..., "port": ..., "result": ...}}`; always written back in
/// the full form.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionPattern {
    /// The kind matched.
    pub kind: ActionKind,
    /// A path pattern (`fs.open`, `fs.unlink`, `fs.rename`: either path;
    /// `proc.exec`: the executed path).
    pub path: Option<PathPattern>,
    /// `fs.open`: read or write.
    pub access: Option<FileAccess>,
    /// `net.connect`, `net.bind`: the address exactly (IP or socket path).
    pub address: Option<String>,
    /// `net.connect`, `net.bind`: the port.
    pub port: Option<u16>,
    /// The event's result exactly (`ok`, `EACCES`).
    pub result: Option<String>,
}

impl ActionPattern {
    /// A pattern matching every action of a kind.
    pub fn kind(kind: ActionKind) -> ActionPattern {
        ActionPattern {
            kind,
            path: None,
            access: None,
            address: None,
            port: None,
            result: None,
        }
    }

    fn has_filters(&self) -> bool {
        self.path.is_some()
            || self.access.is_some()
            || self.address.is_some()
            || self.port.is_some()
            || self.result.is_some()
    }

    /// Whether the pattern filters on what a call named (a path, an
    /// address, a port): what an unresolved event leaves unknown.
    fn filters_on_objects(&self) -> bool {
        self.path.is_some() || self.address.is_some() || self.port.is_some()
    }

    /// Whether the event is an action this pattern names. An unresolved
    /// event (the sandbox could not tell which object or address the call
    /// named) matches no filter on those: it only leaves an absence unproven.
    pub fn matches(&self, event: &BehaviourEvent) -> bool {
        if event.action.kind() != self.kind {
            return false;
        }
        if event.unresolved && self.filters_on_objects() {
            return false;
        }
        if let Some(result) = &self.result
            && event.result.as_ref() != Some(result)
        {
            return false;
        }
        let path_matches = |path: Option<&str>| match (&self.path, path) {
            (None, _) => true,
            (Some(pattern), Some(path)) => pattern.matches(path),
            (Some(_), None) => false,
        };
        let address_matches = |address: &Option<String>, port: &Option<u16>| {
            self.address
                .as_ref()
                .is_none_or(|want| address.as_ref() == Some(want))
                && self.port.is_none_or(|want| *port == Some(want))
        };
        match &event.action {
            Action::FsOpen { path, access } => {
                (path_matches(Some(path)) || event.via.iter().any(|name| path_matches(Some(name))))
                    && self.access.is_none_or(|want| want == *access)
            }
            Action::FsUnlink { path } => path_matches(path.as_deref()),
            Action::FsRename { from, to } => {
                path_matches(from.as_deref()) || path_matches(to.as_deref())
            }
            Action::ProcExec { path, .. } => {
                path_matches(Some(path)) || event.via.iter().any(|name| path_matches(Some(name)))
            }
            Action::NetConnect { address, port, .. } | Action::NetBind { address, port, .. } => {
                address_matches(address, port)
            }
            _ => true,
        }
    }

    /// What the pattern says, for a rationale (`fs.open /sandbox/** write`).
    pub fn describe(&self) -> String {
        let mut words = vec![self.kind.name().to_string()];
        if let Some(path) = &self.path {
            words.push(path.as_str().to_string());
        }
        if let Some(access) = self.access {
            words.push(match access {
                FileAccess::Read => "read".into(),
                FileAccess::Write => "write".into(),
            });
        }
        match (&self.address, self.port) {
            (Some(address), Some(port)) => words.push(format!("{address}:{port}")),
            (Some(address), None) => words.push(address.clone()),
            (None, Some(port)) => words.push(format!("port {port}")),
            (None, None) => {}
        }
        if let Some(result) = &self.result {
            words.push(format!("({result})"));
        }
        words.join(" ")
    }
}

/// How a recorded event reads in a rationale: kind and its main field.
pub fn describe_event(event: &BehaviourEvent) -> String {
    let what = match &event.action {
        Action::NetConnect {
            family,
            address,
            port,
        }
        | Action::NetBind {
            family,
            address,
            port,
        } => match (address, port) {
            (Some(address), Some(port)) => format!("{address}:{port}"),
            (Some(address), None) => address.clone(),
            _ => family.clone(),
        },
        Action::NetSocket {
            family,
            socket_type,
        } => format!("{family} {socket_type}"),
        Action::ProcExec { path, .. } => path.clone(),
        Action::ProcSpawn {} => String::new(),
        Action::ProcSignal { target, signal } => format!("signal {signal} to {target}"),
        Action::ProcPtrace { request, target } => format!("request {request} on {target}"),
        Action::FsOpen { path, access } => format!(
            "{path} for {}",
            match access {
                FileAccess::Read => "reading",
                FileAccess::Write => "writing",
            }
        ),
        Action::FsUnlink { path } => path.clone().unwrap_or_default(),
        Action::FsRename { from, to } => format!(
            "{} to {}",
            from.as_deref().unwrap_or("?"),
            to.as_deref().unwrap_or("?")
        ),
    };
    let mut text = event.action.kind().name().to_string();
    if !what.is_empty() {
        text.push(' ');
        text.push_str(&what);
    }
    if let Some(spelled) = &event.spelled {
        text.push_str(&format!(" (spelled {spelled})"));
    }
    if event.unresolved {
        text.push_str(" (object unresolved)");
    }
    if event.unverified {
        text.push_str(" (arguments unverified)");
    }
    if let Some(result) = &event.result {
        text.push_str(&format!(" ({result})"));
    }
    text
}

/// A case's behaviour as a result line shows it: the counts per kind, or
/// why there is no trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum BehaviourSummary {
    /// Traced: every event counted per kind.
    Traced {
        /// Events per kind (kinds with none absent).
        counts: BTreeMap<ActionKind, u64>,
        /// Events seen but not kept in the evidence.
        #[serde(default, skip_serializing_if = "is_zero")]
        dropped: u64,
        /// Why the trace may lack events, when it may.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        incomplete: Option<String>,
    },
    /// Not traced, and why.
    NotTraced {
        /// Why.
        reason: String,
    },
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl BehaviourSummary {
    /// The summary of one recorded behaviour.
    pub fn of(behaviour: &Behaviour) -> BehaviourSummary {
        match behaviour {
            Behaviour::Traced(trace) => BehaviourSummary::Traced {
                counts: trace.counts.clone(),
                dropped: trace.dropped,
                incomplete: trace.incomplete.clone(),
            },
            Behaviour::NotTraced { reason } => BehaviourSummary::NotTraced {
                reason: reason.clone(),
            },
        }
    }
}

/// What the behaviour shows about one case.
#[derive(Debug, Clone, PartialEq)]
pub enum BehaviourFinding {
    /// Every condition holds.
    Holds,
    /// A condition is proven not to hold: the clause says which and why.
    Violated(String),
    /// The trace cannot decide: the clause says why.
    Undecided(String),
}

/// Checks `condition` against one case's behaviour (`None`: not recorded).
pub fn check(
    index: usize,
    condition: &BehaviourCondition,
    behaviour: Option<&Behaviour>,
) -> BehaviourFinding {
    let trace = match behaviour {
        None => {
            return BehaviourFinding::Undecided(format!(
                "case {index}'s behaviour was not traced (its run recorded none)"
            ));
        }
        Some(Behaviour::NotTraced { reason }) => {
            return BehaviourFinding::Undecided(format!(
                "case {index}'s behaviour was not traced: {reason}"
            ));
        }
        Some(Behaviour::Traced(trace)) => trace,
    };
    let mut undecided = None;
    for pattern in &condition.never {
        if let Some(event) = trace.events.iter().find(|event| pattern.matches(event)) {
            return BehaviourFinding::Violated(format!(
                "case {index} tried {} at {} ms, which it must never do",
                describe_event(event),
                event.at_ms
            ));
        }
        if !pattern.has_filters() && trace.count(pattern.kind) > 0 {
            return BehaviourFinding::Violated(format!(
                "case {index} tried {} ({} time(s)), which it must never do",
                pattern.kind,
                trace.count(pattern.kind)
            ));
        }
        if let Some(why) = absence_unproven(trace, pattern) {
            undecided.get_or_insert(format!(
                "case {index}: whether it never tried {} is unknown: {why}",
                pattern.describe()
            ));
        }
    }
    for pattern in &condition.attempts {
        let seen = trace.events.iter().any(|event| pattern.matches(event))
            || (!pattern.has_filters() && trace.count(pattern.kind) > 0);
        if seen {
            continue;
        }
        match absence_unproven(trace, pattern) {
            Some(why) => {
                undecided.get_or_insert(format!(
                    "case {index}: whether it tried {} is unknown: {why}",
                    pattern.describe()
                ));
            }
            None => {
                return BehaviourFinding::Violated(format!(
                    "case {index} never tried {}, which it was expected to attempt",
                    pattern.describe()
                ));
            }
        }
    }
    match undecided {
        Some(clause) => BehaviourFinding::Undecided(clause),
        None => BehaviourFinding::Holds,
    }
}

/// Why the trace cannot prove that no event matches `pattern`, if it cannot.
fn absence_unproven(trace: &BehaviourTrace, pattern: &ActionPattern) -> Option<String> {
    if !trace.traces(pattern.kind) {
        return Some(match trace.uncovered_because(pattern.kind) {
            Some(why) => format!("the trace does not cover {} ({why})", pattern.kind),
            None => format!("the trace does not cover {}", pattern.kind),
        });
    }
    if let Some(why) = &trace.incomplete {
        return Some(format!("the trace is incomplete ({why})"));
    }
    if let Some(why) = &trace.arguments_unverified
        && pattern.has_filters()
    {
        return Some(format!("the events' arguments are not verified ({why})"));
    }
    if pattern.has_filters() {
        // An event whose arguments the program could have changed (read
        // from its memory while the kernel had yet to read them) may hide
        // a call that matches.
        let unverified = trace
            .events
            .iter()
            .filter(|event| event.action.kind() == pattern.kind && event.unverified)
            .count();
        if unverified > 0 {
            return Some(format!(
                "{unverified} {} event(s) have arguments read from the program's memory, \
                 which it could change before the kernel read them (not verified)",
                pattern.kind
            ));
        }
    }
    if pattern.path.is_some()
        && let Some(why) = &trace.paths_unresolved
    {
        return Some(format!("the trace's paths are not resolved ({why})"));
    }
    if pattern.filters_on_objects() {
        let unresolved = trace
            .events
            .iter()
            .filter(|event| event.action.kind() == pattern.kind && event.unresolved)
            .count();
        if unresolved > 0 {
            return Some(format!(
                "{unresolved} {} event(s) name an object the sandbox could not resolve",
                pattern.kind
            ));
        }
    }
    if pattern.has_filters() && !trace.keeps_every(pattern.kind) {
        return Some(format!(
            "{} events of {} were not kept (only the first {} events are)",
            trace.count(pattern.kind)
                - trace
                    .events
                    .iter()
                    .filter(|event| event.action.kind() == pattern.kind)
                    .count() as u64,
            pattern.kind,
            progscore_sandbox::MAX_KEPT_EVENTS
        ));
    }
    None
}

impl Serialize for ActionPattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut filters = serde_json::Map::new();
        if let Some(path) = &self.path {
            filters.insert("path".into(), path.as_str().into());
        }
        if let Some(access) = self.access {
            filters.insert(
                "access".into(),
                serde_json::to_value(access).map_err(serde::ser::Error::custom)?,
            );
        }
        if let Some(address) = &self.address {
            filters.insert("address".into(), address.clone().into());
        }
        if let Some(port) = self.port {
            filters.insert("port".into(), port.into());
        }
        if let Some(result) = &self.result {
            filters.insert("result".into(), result.clone().into());
        }
        let mut full = serde_json::Map::new();
        full.insert(self.kind.name().into(), filters.into());
        serde_json::Value::Object(full).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ActionPattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let kinds = || {
            ActionKind::ALL
                .iter()
                .map(|kind| kind.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let known_kind = |name: &str| {
            ActionKind::from_name(name).ok_or_else(|| {
                D::Error::custom(format!("unknown action `{name}`; actions: {}", kinds()))
            })
        };
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(name) => Ok(ActionPattern::kind(known_kind(&name)?)),
            serde_json::Value::Object(map) if map.len() == 1 => {
                let (name, filters) = map.into_iter().next().expect("one entry");
                let kind = known_kind(&name)?;
                let serde_json::Value::Object(filters) = filters else {
                    return Err(D::Error::custom(format!(
                        "the filters of `{name}` are an object ({{\"path\": ..., \"access\": ...}})"
                    )));
                };
                let mut pattern = ActionPattern::kind(kind);
                for (key, value) in filters {
                    let applies = match key.as_str() {
                        "path" => matches!(
                            kind,
                            ActionKind::FsOpen
                                | ActionKind::FsUnlink
                                | ActionKind::FsRename
                                | ActionKind::ProcExec
                        ),
                        "access" => kind == ActionKind::FsOpen,
                        "address" | "port" => {
                            matches!(kind, ActionKind::NetConnect | ActionKind::NetBind)
                        }
                        "result" => true,
                        _ => {
                            return Err(D::Error::custom(format!(
                                "unknown filter `{key}` of `{name}`; filters: path, access, address, port, result"
                            )));
                        }
                    };
                    if !applies {
                        return Err(D::Error::custom(format!(
                            "filter `{key}` does not apply to `{name}`"
                        )));
                    }
                    let wrong = |what: &str| {
                        D::Error::custom(format!("filter `{key}` of `{name}` must be {what}"))
                    };
                    match key.as_str() {
                        "path" => {
                            let text = value.as_str().ok_or_else(|| wrong("a string"))?;
                            pattern.path = Some(PathPattern::new(text).map_err(|why| {
                                D::Error::custom(format!(
                                    "filter `path` of `{name}`: `{text}`: {why}"
                                ))
                            })?);
                        }
                        "access" => {
                            pattern.access = Some(
                                serde_json::from_value(value)
                                    .map_err(|_| wrong("`read` or `write`"))?,
                            );
                        }
                        "address" => {
                            pattern.address =
                                Some(value.as_str().ok_or_else(|| wrong("a string"))?.into());
                        }
                        "port" => {
                            let port = value
                                .as_u64()
                                .and_then(|port| u16::try_from(port).ok())
                                .ok_or_else(|| wrong("a port number (0 to 65535)"))?;
                            pattern.port = Some(port);
                        }
                        _ => {
                            pattern.result =
                                Some(value.as_str().ok_or_else(|| wrong("a string"))?.into());
                        }
                    }
                }
                Ok(pattern)
            }
            other => Err(D::Error::custom(format!(
                "an action is its name (\"net.connect\") or {{\"NAME\": {{filters}}}}, not {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at_ms: u64, action: Action, result: &str) -> BehaviourEvent {
        BehaviourEvent::new(at_ms, action, Some(result.into()))
    }

    fn open(path: &str, access: FileAccess) -> Action {
        Action::FsOpen {
            path: path.into(),
            access,
        }
    }

    #[test]
    fn a_path_filter_over_an_unresolved_event_or_trace_is_undetermined_never_true() {
        let shadow: BehaviourCondition = serde_json::from_value(
            serde_json::json!({"never": [{"fs.open": {"path": "/etc/shadow"}}]}),
        )
        .unwrap();
        // Resolved through /proc/self/root: the object is named, spelled beside it.
        let mut aliased = event(2, open("/etc/shadow", FileAccess::Read), "ok");
        aliased.spelled = Some("/proc/self/root/etc/shadow".into());
        let BehaviourFinding::Violated(why) = check(0, &shadow, Some(&traced(vec![aliased])))
        else {
            panic!("a resolved alias proves the never false");
        };
        assert!(
            why.contains("/etc/shadow") && why.contains("/proc/self/root/etc/shadow"),
            "{why}"
        );
        // An open the sandbox could not resolve: unknown, never true.
        let mut unknown = event(2, open("/proc/self/fd/3/shadow", FileAccess::Read), "ok");
        unknown.unresolved = true;
        assert!(matches!(
            check(0, &shadow, Some(&traced(vec![unknown.clone()]))),
            BehaviourFinding::Undecided(why) if why.contains("could not resolve")
        ));
        // ... and a kind-only never is still decided by it.
        let any_open: BehaviourCondition =
            serde_json::from_value(serde_json::json!({"never": ["fs.open"]})).unwrap();
        assert!(matches!(
            check(0, &any_open, Some(&traced(vec![unknown]))),
            BehaviourFinding::Violated(_)
        ));
        // A trace whose paths are unresolved (the program made a symlink).
        let Behaviour::Traced(mut trace) = traced(vec![]) else {
            unreachable!()
        };
        trace.mark_paths_unresolved("the program made a symlink");
        let trace = Behaviour::Traced(trace);
        assert!(matches!(
            check(0, &shadow, Some(&trace)),
            BehaviourFinding::Undecided(why) if why.contains("symlink")
        ));
        assert_eq!(check(0, &any_open, Some(&trace)), BehaviourFinding::Holds);
    }

    fn write(path: &str) -> BehaviourEvent {
        event(
            1,
            Action::FsOpen {
                path: path.into(),
                access: FileAccess::Write,
            },
            "EROFS",
        )
    }

    fn traced(events: Vec<BehaviourEvent>) -> Behaviour {
        let mut trace = BehaviourTrace::new(ActionKind::ALL.to_vec());
        for event in events {
            trace.record(event);
        }
        Behaviour::Traced(trace)
    }

    fn condition(json: serde_json::Value) -> BehaviourCondition {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn patterns_read_in_both_spellings_and_write_back_in_full() {
        let written = condition(serde_json::json!({
            "never": ["net.connect", {"fs.open": {"path": "/sandbox/**", "access": "write"}}],
            "attempts": [{"net.connect": {"address": "1.1.1.1", "port": 443}}]
        }));
        assert_eq!(
            serde_json::to_value(&written).unwrap(),
            serde_json::json!({
                "never": [{"net.connect": {}}, {"fs.open": {"path": "/sandbox/**", "access": "write"}}],
                "attempts": [{"net.connect": {"address": "1.1.1.1", "port": 443}}]
            })
        );
        for (bad, says) in [
            (
                serde_json::json!({"never": ["net.teleport"]}),
                "unknown action `net.teleport`",
            ),
            (
                serde_json::json!({"never": [{"net.connect": {"path": "/x"}}]}),
                "filter `path` does not apply to `net.connect`",
            ),
            (
                serde_json::json!({"never": [{"fs.open": {"path": "sandbox"}}]}),
                "absolute",
            ),
            (
                serde_json::json!({"sometimes": []}),
                "unknown field `sometimes`",
            ),
        ] {
            let error = serde_json::from_value::<BehaviourCondition>(bad)
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn an_event_proves_and_only_a_complete_trace_proves_absence() {
        let never = condition(serde_json::json!({
            "never": ["net.connect", {"fs.open": {"path": "/sandbox/**", "access": "write"}}]
        }));
        let connect = event(
            4,
            Action::NetConnect {
                family: "inet".into(),
                address: Some("1.1.1.1".into()),
                port: Some(443),
            },
            "ENETUNREACH",
        );
        let BehaviourFinding::Violated(clause) =
            check(0, &never, Some(&traced(vec![connect.clone()])))
        else {
            panic!("a recorded connect violates never");
        };
        assert!(
            clause.contains("net.connect 1.1.1.1:443 (ENETUNREACH)"),
            "{clause}"
        );
        assert!(matches!(
            check(0, &never, Some(&traced(vec![write("/sandbox/out.txt")]))),
            BehaviourFinding::Violated(_)
        ));
        // A write elsewhere is no violation of a pattern on /sandbox.
        assert_eq!(
            check(0, &never, Some(&traced(vec![write("/tmp/x")]))),
            BehaviourFinding::Holds
        );

        // Absence is proven only by a complete trace of the kind.
        let mut incomplete = BehaviourTrace::new(ActionKind::ALL.to_vec());
        incomplete.mark_incomplete("the stream was cut");
        assert!(matches!(
            check(1, &never, Some(&Behaviour::Traced(incomplete))),
            BehaviourFinding::Undecided(clause) if clause.contains("the stream was cut")
        ));
        // Arguments the program could have changed prove no absence that
        // depends on them; a kind's absence still stands.
        let mut unverified = BehaviourTrace::new(ActionKind::ALL.to_vec());
        unverified.arguments_unverified = Some("read from the program's memory".into());
        let unverified = Behaviour::Traced(unverified);
        assert!(matches!(
            check(1, &never, Some(&unverified)),
            BehaviourFinding::Undecided(clause) if clause.contains("not verified")
        ));
        let kinds_only = condition(serde_json::json!({"never": ["net.connect"]}));
        assert_eq!(
            check(1, &kinds_only, Some(&unverified)),
            BehaviourFinding::Holds
        );
        // Per event: an unverified write leaves a path pattern of its kind
        // undecided (it may have named /sandbox); verified ones decide it,
        // and an unverified event of another kind does not matter.
        let mut unverified_write = write("/tmp/x");
        unverified_write.unverified = true;
        assert!(matches!(
            check(1, &never, Some(&traced(vec![write("/tmp/y"), unverified_write.clone()]))),
            BehaviourFinding::Undecided(clause) if clause.contains("not verified")
        ));
        assert_eq!(
            check(1, &never, Some(&traced(vec![write("/tmp/y")]))),
            BehaviourFinding::Holds
        );
        let mut unverified_exec = event(
            0,
            Action::ProcExec {
                path: "/bin/true".into(),
                argv: Vec::new(),
            },
            "ok",
        );
        unverified_exec.unverified = true;
        let sandbox_writes = condition(
            serde_json::json!({"never": [{"fs.open": {"path": "/sandbox/**", "access": "write"}}]}),
        );
        assert_eq!(
            check(1, &sandbox_writes, Some(&traced(vec![unverified_exec]))),
            BehaviourFinding::Holds
        );
        // An unverified event still proves what it names was tried.
        let mut unverified_sandbox = write("/sandbox/x");
        unverified_sandbox.unverified = true;
        assert!(matches!(
            check(1, &sandbox_writes, Some(&traced(vec![unverified_sandbox]))),
            BehaviourFinding::Violated(_)
        ));
        let narrow = Behaviour::Traced(BehaviourTrace::new(vec![ActionKind::FsOpen]));
        assert!(matches!(
            check(1, &never, Some(&narrow)),
            BehaviourFinding::Undecided(clause) if clause.contains("does not cover net.connect")
        ));
        assert!(matches!(
            check(2, &never, Some(&Behaviour::not_traced("runc cannot trace"))),
            BehaviourFinding::Undecided(clause) if clause.contains("runc cannot trace")
        ));
        assert!(matches!(
            check(2, &never, None),
            BehaviourFinding::Undecided(_)
        ));

        // A flood: the kind's count still proves a kind-only pattern; a
        // path pattern is undecided when writes were dropped, proven when
        // a kept one matches.
        let flood = traced(
            (0..progscore_sandbox::MAX_KEPT_EVENTS + 5)
                .map(|_| write("/tmp/x"))
                .collect(),
        );
        assert!(matches!(
            check(3, &never, Some(&flood)),
            BehaviourFinding::Undecided(clause) if clause.contains("5 events of fs.open were not kept")
        ));
        // A write seen only in the counts (every kept slot holds a connect)
        // still violates a kind-only `never`.
        let mut full = vec![connect.clone(); progscore_sandbox::MAX_KEPT_EVENTS];
        full.push(write("/tmp/x"));
        let kinds = condition(serde_json::json!({"never": ["fs.open"]}));
        assert!(matches!(
            check(3, &kinds, Some(&traced(full))),
            BehaviourFinding::Violated(clause) if clause.contains("fs.open (1 time(s))")
        ));

        let attempts = condition(serde_json::json!({"attempts": ["net.connect"]}));
        assert_eq!(
            check(0, &attempts, Some(&traced(vec![connect]))),
            BehaviourFinding::Holds
        );
        assert!(matches!(
            check(0, &attempts, Some(&traced(vec![]))),
            BehaviourFinding::Violated(clause) if clause.contains("never tried net.connect")
        ));
    }
}
