//! What a program tried to do inside its sandbox, as the sandbox saw it:
//! connections, executions, spawns, signals, ptrace, writes and sensitive
//! reads. A backend that traces records one [`Behaviour`] per invocation; a
//! backend (or profile) that cannot says so ([`Behaviour::NotTraced`]), never
//! with an empty trace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How many events an invocation keeps; every event is still counted
/// ([`BehaviourTrace::counts`]), as output beyond its cap is.
pub const MAX_KEPT_EVENTS: usize = 256;

/// The longest path or argument kept in an event, in bytes (cut on a char
/// boundary, ending with `…`).
pub const MAX_EVENT_TEXT: usize = 512;

/// The most argv entries an exec event keeps.
pub const MAX_EVENT_ARGV: usize = 32;

/// An invocation's behaviour: traced, or why not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Behaviour {
    /// The sandbox traced the program.
    Traced(BehaviourTrace),
    /// Nothing is known of what the program tried: says why (the backend
    /// cannot trace, the trace could not be set up or read).
    NotTraced {
        /// Why there is no trace.
        reason: String,
    },
}

impl Behaviour {
    /// No trace, for this reason.
    pub fn not_traced(reason: impl Into<String>) -> Behaviour {
        Behaviour::NotTraced {
            reason: reason.into(),
        }
    }

    /// The trace, when there is one.
    pub fn trace(&self) -> Option<&BehaviourTrace> {
        match self {
            Behaviour::Traced(trace) => Some(trace),
            Behaviour::NotTraced { .. } => None,
        }
    }

    /// One line for people: `traced: net.connect 1, fs.open 2`,
    /// `traced: nothing tried`, `not traced: REASON`.
    pub fn summary(&self) -> String {
        let trace = match self {
            Behaviour::NotTraced { reason } => return format!("not traced: {reason}"),
            Behaviour::Traced(trace) => trace,
        };
        let mut line = if trace.counts.is_empty() {
            "traced: nothing tried".to_string()
        } else {
            let counts: Vec<String> = trace
                .counts
                .iter()
                .map(|(kind, count)| format!("{kind} {count}"))
                .collect();
            format!("traced: {}", counts.join(", "))
        };
        if trace.dropped > 0 {
            line.push_str(&format!(" ({} events not kept)", trace.dropped));
        }
        if let Some(why) = &trace.incomplete {
            line.push_str(&format!("; incomplete: {why}"));
        }
        line
    }
}

/// The kinds of action a trace records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ActionKind {
    /// A connection attempt (`connect`).
    #[serde(rename = "net.connect")]
    NetConnect,
    /// A socket created (`socket`).
    #[serde(rename = "net.socket")]
    NetSocket,
    /// An address bound (`bind`).
    #[serde(rename = "net.bind")]
    NetBind,
    /// A program executed (`execve`, `execveat`).
    #[serde(rename = "proc.exec")]
    ProcExec,
    /// A new process (`fork`, `vfork`, `clone` without `CLONE_THREAD`).
    #[serde(rename = "proc.spawn")]
    ProcSpawn,
    /// A signal sent (`kill`, `tkill`, `tgkill`).
    #[serde(rename = "proc.signal")]
    ProcSignal,
    /// A `ptrace` call.
    #[serde(rename = "proc.ptrace")]
    ProcPtrace,
    /// A file opened for writing, or a sensitive path opened at all.
    #[serde(rename = "fs.open")]
    FsOpen,
    /// A file removed (`unlink`, `unlinkat`).
    #[serde(rename = "fs.unlink")]
    FsUnlink,
    /// A file renamed (`rename`, `renameat`, `renameat2`).
    #[serde(rename = "fs.rename")]
    FsRename,
}

impl ActionKind {
    /// Every kind, in order.
    pub const ALL: [ActionKind; 10] = [
        ActionKind::NetConnect,
        ActionKind::NetSocket,
        ActionKind::NetBind,
        ActionKind::ProcExec,
        ActionKind::ProcSpawn,
        ActionKind::ProcSignal,
        ActionKind::ProcPtrace,
        ActionKind::FsOpen,
        ActionKind::FsUnlink,
        ActionKind::FsRename,
    ];

    /// The kind's name, as written in JSON and in expectations.
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::NetConnect => "net.connect",
            ActionKind::NetSocket => "net.socket",
            ActionKind::NetBind => "net.bind",
            ActionKind::ProcExec => "proc.exec",
            ActionKind::ProcSpawn => "proc.spawn",
            ActionKind::ProcSignal => "proc.signal",
            ActionKind::ProcPtrace => "proc.ptrace",
            ActionKind::FsOpen => "fs.open",
            ActionKind::FsUnlink => "fs.unlink",
            ActionKind::FsRename => "fs.rename",
        }
    }

    /// The kind of this name.
    pub fn from_name(name: &str) -> Option<ActionKind> {
        ActionKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

impl std::fmt::Display for ActionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a file was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileAccess {
    /// Read only.
    Read,
    /// Written (write only, read-write, create or truncate).
    Write,
}

/// What was tried, with what the sandbox saw of its arguments. Paths and
/// arguments are the program's own (untrusted) text, cut to
/// [`MAX_EVENT_TEXT`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Action {
    /// A connection attempt.
    #[serde(rename = "net.connect")]
    NetConnect {
        /// `inet`, `inet6`, `unix`, or `family N`.
        family: String,
        /// The address (IP, or the socket path for `unix`), when readable.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        address: Option<String>,
        /// The port, for `inet` and `inet6`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
    },
    /// A socket created.
    #[serde(rename = "net.socket")]
    NetSocket {
        /// `inet`, `inet6`, `unix`, `netlink`, or `family N`.
        family: String,
        /// `stream`, `dgram`, `raw`, `seqpacket`, or `type N`.
        socket_type: String,
    },
    /// An address bound.
    #[serde(rename = "net.bind")]
    NetBind {
        /// As for [`Action::NetConnect`].
        family: String,
        /// The address, when readable.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        address: Option<String>,
        /// The port, for `inet` and `inet6`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
    },
    /// A program executed.
    #[serde(rename = "proc.exec")]
    ProcExec {
        /// The path given (or the binary the sandbox resolved).
        path: String,
        /// Its arguments (at most [`MAX_EVENT_ARGV`]).
        #[serde(default)]
        argv: Vec<String>,
    },
    /// A new process.
    #[serde(rename = "proc.spawn")]
    ProcSpawn {},
    /// A signal sent.
    #[serde(rename = "proc.signal")]
    ProcSignal {
        /// The target pid (or tid), as the program gave it.
        target: i64,
        /// The signal number.
        signal: i64,
    },
    /// A `ptrace` call.
    #[serde(rename = "proc.ptrace")]
    ProcPtrace {
        /// The request number (`PTRACE_ATTACH` is 16, `PTRACE_TRACEME` 0).
        request: i64,
        /// The target pid.
        target: i64,
    },
    /// A file opened for writing, or a sensitive path opened.
    #[serde(rename = "fs.open")]
    FsOpen {
        /// The absolute path when the sandbox could resolve it, else as given.
        path: String,
        /// Read or write.
        access: FileAccess,
    },
    /// A file removed; the path when the sandbox reports it.
    #[serde(rename = "fs.unlink")]
    FsUnlink {
        /// The path, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// A file renamed; the paths when the sandbox reports them.
    #[serde(rename = "fs.rename")]
    FsRename {
        /// The old path, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// The new path, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<String>,
    },
}

impl Action {
    /// The action's kind.
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::NetConnect { .. } => ActionKind::NetConnect,
            Action::NetSocket { .. } => ActionKind::NetSocket,
            Action::NetBind { .. } => ActionKind::NetBind,
            Action::ProcExec { .. } => ActionKind::ProcExec,
            Action::ProcSpawn {} => ActionKind::ProcSpawn,
            Action::ProcSignal { .. } => ActionKind::ProcSignal,
            Action::ProcPtrace { .. } => ActionKind::ProcPtrace,
            Action::FsOpen { .. } => ActionKind::FsOpen,
            Action::FsUnlink { .. } => ActionKind::FsUnlink,
            Action::FsRename { .. } => ActionKind::FsRename,
        }
    }
}

/// One action the program tried, when, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BehaviourEvent {
    /// Milliseconds from the program's start (the trace's first event).
    pub at_ms: u64,
    /// What was tried.
    #[serde(flatten)]
    pub action: Action,
    /// `ok`, or the error's name (`EACCES`, `ENETUNREACH`, `errno 97`);
    /// absent when the sandbox saw the attempt only (an exec that
    /// succeeded does not return).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The path as the program spelled it, when it differs from the object
    /// the call reached (the event's `path`: symlinks, `..`,
    /// `/proc/self/root`, `/proc/self/fd/N`, a folder descriptor resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spelled: Option<String>,
    /// Other absolute names through which the call reached its object
    /// (the spelled path made absolute, each symlink on the way:
    /// `/bin/sh` for an exec that reached `/usr/bin/dash`); a path filter
    /// matches the object or any of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub via: Vec<String>,
    /// Set when the sandbox could not tell which object (path) or address
    /// the call named: the event's path or address is then as spelled (or
    /// missing), and no filter on it is matched or proven absent.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unresolved: bool,
    /// Set when the event's arguments (path, address) were read from the
    /// program's memory while it ran, so that another of its threads could
    /// have changed them before the kernel read them (runc's listener,
    /// for a call it let the kernel run). Such an event still proves what
    /// it names was tried; an absence filtered on its kind's arguments is
    /// not proven.
    #[serde(default, skip_serializing_if = "is_false")]
    pub unverified: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl BehaviourEvent {
    /// An event whose arguments are the objects the call reached.
    pub fn new(at_ms: u64, action: Action, result: Option<String>) -> BehaviourEvent {
        BehaviourEvent {
            at_ms,
            action,
            result,
            spelled: None,
            via: Vec::new(),
            unresolved: false,
            unverified: false,
        }
    }
}

/// A traced invocation's behaviour: the kinds the trace covers, the first
/// events, every event counted, and whether anything may be missing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BehaviourTrace {
    /// The kinds this trace covers; an action of another kind is not seen.
    pub traced_kinds: Vec<ActionKind>,
    /// The first [`MAX_KEPT_EVENTS`] events, in order.
    #[serde(default)]
    pub events: Vec<BehaviourEvent>,
    /// Every event seen, kept or not, per kind (kinds with none absent).
    #[serde(default)]
    pub counts: BTreeMap<ActionKind, u64>,
    /// Events seen but not kept (beyond [`MAX_KEPT_EVENTS`]).
    #[serde(default)]
    pub dropped: u64,
    /// Set when the trace may lack events the program caused (the stream
    /// was cut, malformed, or the sandbox dropped events): says why. Such a
    /// trace proves no absence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// Set when every event's arguments (paths, addresses) may have been
    /// read from the program's own memory while it ran, so that the
    /// program could have changed them: says so. Kinds and counts stay
    /// exact; an absence that depends on an argument is not proven. (runc
    /// traces before verified opens carried it; they now mark each such
    /// event `unverified` instead.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_unverified: Option<String>,
    /// Set when the trace cannot tell which objects the program's paths
    /// reached (it made a symlink or a link, or changed its root, which the
    /// sandbox's trace does not follow): says why. Kinds and counts stay
    /// exact; an absence that depends on a path is not proven.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths_unresolved: Option<String>,
    /// Why a kind the trace was to cover left its coverage (the first
    /// reason per kind): the call seen that may have done it unseen.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub uncovered: BTreeMap<ActionKind, String>,
}

impl BehaviourTrace {
    /// An empty trace covering these kinds.
    pub fn new(traced_kinds: Vec<ActionKind>) -> BehaviourTrace {
        BehaviourTrace {
            traced_kinds,
            ..BehaviourTrace::default()
        }
    }

    /// Counts the event and keeps it while there is room.
    pub fn record(&mut self, event: BehaviourEvent) {
        *self.counts.entry(event.action.kind()).or_default() += 1;
        if self.events.len() < MAX_KEPT_EVENTS {
            self.events.push(event);
        } else {
            self.dropped += 1;
        }
    }

    /// Marks the trace incomplete (the first reason stays).
    pub fn mark_incomplete(&mut self, reason: impl Into<String>) {
        if self.incomplete.is_none() {
            self.incomplete = Some(reason.into());
        }
    }

    /// How many events of this kind were seen.
    pub fn count(&self, kind: ActionKind) -> u64 {
        self.counts.get(&kind).copied().unwrap_or(0)
    }

    /// Whether every event of this kind seen is kept (none dropped).
    pub fn keeps_every(&self, kind: ActionKind) -> bool {
        let kept = self
            .events
            .iter()
            .filter(|event| event.action.kind() == kind)
            .count() as u64;
        kept == self.count(kind)
    }

    /// Marks every path of the trace unresolved (the first reason stays).
    pub fn mark_paths_unresolved(&mut self, reason: impl Into<String>) {
        if self.paths_unresolved.is_none() {
            self.paths_unresolved = Some(reason.into());
        }
    }

    /// Leaves `kind` out of the kinds the trace covers (a call that may do
    /// it was seen but not decoded), saying why: its absence is then
    /// unproven. The first reason per kind stays.
    pub fn stop_covering(&mut self, kind: ActionKind, reason: impl Into<String>) {
        self.traced_kinds.retain(|traced| *traced != kind);
        self.uncovered.entry(kind).or_insert_with(|| reason.into());
    }

    /// Why the trace does not cover `kind`, if it left its coverage.
    pub fn uncovered_because(&self, kind: ActionKind) -> Option<&str> {
        self.uncovered.get(&kind).map(String::as_str)
    }

    /// Whether the trace covers this kind.
    pub fn traces(&self, kind: ActionKind) -> bool {
        self.traced_kinds.contains(&kind)
    }
}

/// Text from the program cut to [`MAX_EVENT_TEXT`] bytes on a char boundary.
pub fn bounded_text(text: &str) -> String {
    if text.len() <= MAX_EVENT_TEXT {
        return text.to_string();
    }
    let mut end = MAX_EVENT_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Why a path pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidPathPattern {
    /// Not absolute.
    #[error("a path pattern is absolute (starts with `/`)")]
    Relative,
    /// Not a pattern: what the pattern syntax says.
    #[error("{0}")]
    Glob(String),
}

/// `path` (absolute) with `.`, `..` and repeated slashes resolved by name
/// (`..` at the root stays at the root, as the kernel has it).
pub fn normalise_path(path: &str) -> String {
    let mut names: Vec<&str> = Vec::new();
    for name in path.split('/') {
        match name {
            "" | "." => {}
            ".." => {
                names.pop();
            }
            name => names.push(name),
        }
    }
    format!("/{}", names.join("/"))
}

/// An absolute path pattern: `*` matches within one name, `**` across
/// folders (`/sandbox/**`), `?` one character.
#[derive(Debug, Clone)]
pub struct PathPattern {
    written: String,
    matcher: globset::GlobMatcher,
}

impl PathPattern {
    /// Checks and compiles a pattern; says what is wrong with a bad one.
    pub fn new(pattern: &str) -> Result<PathPattern, InvalidPathPattern> {
        if !pattern.starts_with('/') {
            return Err(InvalidPathPattern::Relative);
        }
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|error| InvalidPathPattern::Glob(error.kind().to_string()))?;
        Ok(PathPattern {
            written: pattern.to_string(),
            matcher: glob.compile_matcher(),
        })
    }

    /// Whether the path matches.
    pub fn matches(&self, path: &str) -> bool {
        self.matcher.is_match(path)
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.written
    }
}

impl PartialEq for PathPattern {
    fn eq(&self, other: &Self) -> bool {
        self.written == other.written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(at_ms: u64) -> BehaviourEvent {
        BehaviourEvent::new(
            at_ms,
            Action::NetConnect {
                family: "inet".into(),
                address: Some("1.1.1.1".into()),
                port: Some(443),
            },
            Some("ENETUNREACH".into()),
        )
    }

    #[test]
    fn events_read_as_the_issue_writes_them() {
        let json = serde_json::to_value(connect(3)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"at_ms": 3, "kind": "net.connect", "family": "inet",
                "address": "1.1.1.1", "port": 443, "result": "ENETUNREACH"})
        );
        assert_eq!(
            serde_json::from_value::<BehaviourEvent>(json).unwrap(),
            connect(3)
        );
        let not_traced = serde_json::to_value(Behaviour::not_traced("runc")).unwrap();
        assert_eq!(
            not_traced,
            serde_json::json!({"status": "not_traced", "reason": "runc"})
        );
        for kind in ActionKind::ALL {
            assert_eq!(ActionKind::from_name(kind.name()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
        }
    }

    #[test]
    fn a_flood_is_counted_whole_and_kept_bounded() {
        let mut trace = BehaviourTrace::new(ActionKind::ALL.to_vec());
        for at in 0..(MAX_KEPT_EVENTS as u64 + 10) {
            trace.record(connect(at));
        }
        assert_eq!(trace.events.len(), MAX_KEPT_EVENTS);
        assert_eq!(
            trace.count(ActionKind::NetConnect),
            MAX_KEPT_EVENTS as u64 + 10
        );
        assert_eq!(trace.dropped, 10);
        assert!(!trace.keeps_every(ActionKind::NetConnect));
        assert!(trace.keeps_every(ActionKind::FsOpen));
        let sandbox = PathPattern::new("/sandbox/**").unwrap();
        assert!(sandbox.matches("/sandbox/data/in.txt") && !sandbox.matches("/tmp/x"));
        let environ = PathPattern::new("/proc/*/environ").unwrap();
        assert!(environ.matches("/proc/1/environ") && !environ.matches("/proc/1/task/1/environ"));
        assert!(PathPattern::new("etc/shadow").is_err() && PathPattern::new("/a/[").is_err());
        let text = "é".repeat(MAX_EVENT_TEXT);
        let cut = bounded_text(&text);
        assert!(cut.len() <= MAX_EVENT_TEXT + '…'.len_utf8() && cut.ends_with('…'));
    }
}
