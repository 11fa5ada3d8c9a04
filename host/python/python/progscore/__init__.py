"""progscore for Python: run submitted programs in hardened sandboxes and
score what they do, with the evidence kept in the same SQLite store the
``progscore`` CLI uses.

The types are plain frozen dataclasses; the work (sandboxes, comparators,
the store) is progscore's own Rust code, running on its own runtime: awaiting
never blocks the event loop. Cancelling a task that awaits a run or a score
cancels the run and ends only after its containers and workspaces are gone.

A verdict is ``True``, ``False``, or ``None`` (undetermined, with a reason):
an infrastructure fault, a timeout the machine was too busy to prove, or a
truncated output never gives a wrong ``True`` or ``False``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import _native
from ._native import (
    EvidenceStoreError,
    InvalidExpectationError,
    ProgscoreError,
    ReplayRefusedError,
    SandboxRefusedError,
)

__all__ = [
    "CapturedStream",
    "CaseReport",
    "CompileEvent",
    "Comparator",
    "Contains",
    "ContentScorable",
    "DockerRuntimeProfile",
    "DockerSandboxClient",
    "Equals",
    "EvidenceStore",
    "EvidenceStoreError",
    "InvalidExpectationError",
    "InvocationEvent",
    "Json",
    "Lines",
    "Number",
    "Observation",
    "ProgramBehaves",
    "ProgramCase",
    "ProgramExecutionScorer",
    "ProgramExecutionSource",
    "ProgramInvocation",
    "ProgramResult",
    "ProgramRun",
    "ProgscoreError",
    "Regex",
    "ReplayRefusedError",
    "SandboxRefusedError",
    "Score",
    "ScoringExpectation",
    "ScoringItem",
]

JsonValue = Any


def _params(value: JsonValue, **options: JsonValue) -> dict[str, JsonValue]:
    params: dict[str, JsonValue] = {"value": value}
    params.update({name: option for name, option in options.items() if option is not None})
    return params


# ---------------------------------------------------------------- conditions


@dataclass(frozen=True)
class Equals:
    """The stream equals ``value`` (by default ASCII whitespace at both ends is trimmed)."""

    value: str
    trim: Optional[bool] = None
    ignore_case: Optional[bool] = None
    normalize_newlines: Optional[bool] = None

    def _json(self) -> dict[str, JsonValue]:
        return {
            "comparator": "equals",
            "params": _params(
                self.value,
                trim=self.trim,
                ignore_case=self.ignore_case,
                normalize_newlines=self.normalize_newlines,
            ),
        }


@dataclass(frozen=True)
class Contains:
    """The stream contains ``value``."""

    value: str
    ignore_case: Optional[bool] = None

    def _json(self) -> dict[str, JsonValue]:
        return {"comparator": "contains", "params": _params(self.value, ignore_case=self.ignore_case)}


@dataclass(frozen=True)
class Regex:
    """The stream matches a Python ``re`` pattern (``re.search``, or ``re.fullmatch``)."""

    value: str
    full_match: Optional[bool] = None

    def _json(self) -> dict[str, JsonValue]:
        return {"comparator": "regex", "params": _params(self.value, full_match=self.full_match)}


@dataclass(frozen=True)
class Json:
    """The stream is JSON equal to ``value`` (keys in any order, numbers by value)."""

    value: JsonValue
    float_tolerance: Optional[float] = None

    def _json(self) -> dict[str, JsonValue]:
        return {
            "comparator": "json",
            "params": _params(self.value, float_tolerance=self.float_tolerance),
        }


@dataclass(frozen=True)
class Number:
    """The stream's numbers are ``value``'s within tolerances."""

    value: Union[float, Sequence[float], str]
    abs: Optional[float] = None
    rel: Optional[float] = None

    def _json(self) -> dict[str, JsonValue]:
        value = list(self.value) if isinstance(self.value, (list, tuple)) else self.value
        return {"comparator": "number", "params": _params(value, abs=self.abs, rel=self.rel)}


@dataclass(frozen=True)
class Lines:
    """The stream's lines are ``value``'s (in order, or as a multiset)."""

    value: Union[str, Sequence[str]]
    unordered: Optional[bool] = None

    def _json(self) -> dict[str, JsonValue]:
        value = self.value if isinstance(self.value, str) else list(self.value)
        return {"comparator": "lines", "params": _params(value, unordered=self.unordered)}


@dataclass(frozen=True)
class Comparator:
    """Any comparator by name (a user comparator of the config), with its parameters."""

    name: str
    params: Mapping[str, JsonValue] = field(default_factory=dict)

    def _json(self) -> dict[str, JsonValue]:
        return {"comparator": self.name, "params": dict(self.params)}


TextCondition = Union[Equals, Contains, Regex, Json, Number, Lines, Comparator]


# ---------------------------------------------------------------- what to run and expect


def _bytes_json(data: Union[str, bytes]) -> JsonValue:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _bytes_from_json(value: JsonValue) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and "base64" in value:
        return base64.b64decode(value["base64"])
    raise ProgscoreError(f"not a byte string: {value!r}")


def _strings(owner: str, field_name: str, value: Any, *, optional: bool = False) -> Any:
    """``value`` checked as a sequence of strings (an iterator made a tuple,
    so that checking it does not use it up). A string (or bytes) is refused:
    ``list("10")`` would silently be ``["1", "0"]``."""
    if optional and value is None:
        return value
    if isinstance(value, (str, bytes, bytearray)):
        alternative = " or None" if optional else ""
        raise TypeError(
            f"{owner}.{field_name} must be a sequence of strings, not a single "
            f"{type(value).__name__} ({value!r}); write [{value!r}]{alternative}"
        )
    if not isinstance(value, Iterable):
        raise TypeError(f"{owner}.{field_name} must be a sequence of strings, not {type(value).__name__}")
    if not isinstance(value, Sequence):
        value = tuple(value)
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise TypeError(f"{owner}.{field_name}[{index}] must be a string, not {type(item).__name__} ({item!r})")
    return value


def _items(owner: str, field_name: str, value: Any, kind: type) -> Any:
    """``value`` checked as a sequence of ``kind`` (an iterator made a tuple);
    a single item or a string is refused."""
    if isinstance(value, (str, bytes, bytearray, kind)) or not isinstance(value, Iterable):
        raise TypeError(f"{owner}.{field_name} must be a sequence of {kind.__name__}, not {type(value).__name__}")
    if not isinstance(value, Sequence):
        value = tuple(value)
    for index, item in enumerate(value):
        if not isinstance(item, kind):
            raise TypeError(f"{owner}.{field_name}[{index}] must be a {kind.__name__}, not {type(item).__name__}")
    return value


@dataclass(frozen=True)
class ProgramInvocation:
    """One run of a program: the arguments after its path, and its stdin
    (``None``: closed at once)."""

    arguments: Sequence[str] = ()
    stdin: Optional[Union[str, bytes]] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", _strings("ProgramInvocation", "arguments", self.arguments))

    def _json(self) -> dict[str, JsonValue]:
        return {
            "args": list(self.arguments),
            "stdin": None if self.stdin is None else _bytes_json(self.stdin),
        }

    @staticmethod
    def _from_json(value: Mapping[str, JsonValue]) -> ProgramInvocation:
        stdin = value.get("stdin")
        return ProgramInvocation(
            arguments=tuple(value.get("args", ())),
            stdin=None if stdin is None else _bytes_from_json(stdin),
        )


@dataclass(frozen=True)
class ProgramResult:
    """What one invocation must produce: conditions on stdout and stderr,
    the exit code (0 by default), and its traced behaviour (see
    ``ProgramBehaves.behaviour``)."""

    stdout: Optional[TextCondition] = None
    stderr: Optional[TextCondition] = None
    exit_code: int = 0
    behaviour: Optional[Mapping[str, Sequence[JsonValue]]] = None
    answer: Optional[Union[str, bytes]] = None
    """The expected answer, given to the item's ``checker`` with the case's
    input and the program's output."""

    def _json(self) -> dict[str, JsonValue]:
        result: dict[str, JsonValue] = {"exit_code": self.exit_code}
        if self.answer is not None:
            result["answer"] = _file_json(self.answer)
        if self.stdout is not None:
            result["stdout"] = self.stdout._json()
        if self.stderr is not None:
            result["stderr"] = self.stderr._json()
        if self.behaviour is not None:
            result["behaviour"] = _behaviour_json(self.behaviour)
        return result


def _behaviour_json(behaviour: Mapping[str, Sequence[JsonValue]]) -> JsonValue:
    """A behaviour condition as the batch line writes it."""
    return {key: list(patterns) for key, patterns in behaviour.items()}


@dataclass(frozen=True)
class ProgramCase:
    """One invocation and what it must produce."""

    invocation: ProgramInvocation
    expected: ProgramResult = field(default_factory=ProgramResult)

    def _json(self) -> dict[str, JsonValue]:
        return {"invocation": self.invocation._json(), "expected": self.expected._json()}


def _file_json(content: Union[str, bytes]) -> JsonValue:
    """A file's content as the batch line writes it: text, or base64 for bytes."""
    if isinstance(content, str):
        return content
    if isinstance(content, (bytes, bytearray)):
        return {"base64": base64.b64encode(bytes(content)).decode("ascii")}
    raise TypeError(f"ProgramBehaves.files: a file's content is str or bytes, not {type(content).__name__}")


@dataclass(frozen=True)
class ProgramBehaves:
    """Run the program under a configured profile once per case (each in a
    fresh sandbox) and check each result.

    ``limits`` and ``compile_limits`` are the program's own limits over the
    profile's (its keys and units: ``{"timeout": "2s", "memory": "256MiB"}``;
    ``cpus`` stays the profile's). They are part of the attempt: the same
    program under other limits runs again.

    ``files`` are placed beside the program, in its folder, read-only (relative
    path: ``str`` or ``bytes``), seen by its compile and every case; a program
    that brings files starts in its folder. Their digests are part of the
    attempt.

    ``behaviour`` is what every case's traced behaviour must show, for a
    profile with ``trace = true``: ``{"never": ["net.connect", {"fs.open":
    {"path": "/sandbox/**", "access": "write"}}], "attempts": [...]}``. A
    recorded event proves it false (``never``) or true (``attempts``); only a
    complete trace proves an absence, else the result is undetermined.

    ``score`` is how the item's score comes from its cases' (``{"policy":
    "fraction"}``, ``{"policy": "groups", "groups": [...]}``; all-pass when
    absent). ``checker`` judges each case's output against its
    ``ProgramResult.answer``: a checker component by name (``"yes_no"``,
    ``{"component": {"name": "floats", "params": {"abs": 1e-9}}}``) or a
    checker program (``{"program": {"profile": "cpp", "source": "...",
    "protocol": "testlib"}}``); see docs/judging.md.

    ``interactor`` makes the item interactive: a program under testlib's
    conventions (``{"profile": "cpp", "source": "...", "files": {...},
    "limits": {...}, "max_points": 1}``) that talks to the program case by
    case in a sandbox of its own, each case's ``stdin`` its INPUT and the
    case's ``answer`` its ANSWER (the program's stdin is the conversation);
    it gives each case's verdict. The conversation is kept with the run
    (``run.interaction``); see docs/judging.md."""

    runtime_profile_name: str
    cases: Sequence[ProgramCase]
    limits: Optional[Mapping[str, Union[str, int]]] = None
    compile_limits: Optional[Mapping[str, Union[str, int]]] = None
    files: Optional[Mapping[str, Union[str, bytes]]] = None
    behaviour: Optional[Mapping[str, Sequence[JsonValue]]] = None
    score: Optional[Mapping[str, JsonValue]] = None
    checker: Optional[Union[str, Mapping[str, JsonValue]]] = None
    interactor: Optional[Mapping[str, JsonValue]] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cases", _items("ProgramBehaves", "cases", self.cases, ProgramCase))

    def _json(self) -> dict[str, JsonValue]:
        behaves: dict[str, JsonValue] = {
            "profile": self.runtime_profile_name,
            "cases": [case._json() for case in self.cases],
        }
        if self.limits is not None:
            behaves["limits"] = dict(self.limits)
        if self.compile_limits is not None:
            behaves["compile_limits"] = dict(self.compile_limits)
        if self.files:
            behaves["files"] = {path: _file_json(content) for path, content in self.files.items()}
        if self.behaviour is not None:
            behaves["behaviour"] = _behaviour_json(self.behaviour)
        if self.score is not None:
            behaves["score"] = dict(self.score)
        if self.checker is not None:
            behaves["checker"] = self.checker if isinstance(self.checker, str) else dict(self.checker)
        if self.interactor is not None:
            behaves["interactor"] = dict(self.interactor)
        return {"program_behaves": behaves}


@dataclass(frozen=True)
class ScoringExpectation:
    """Everything a score checks (today exactly one ``ProgramBehaves``)."""

    conditions: Sequence[ProgramBehaves]

    def __post_init__(self) -> None:
        conditions = _items("ScoringExpectation", "conditions", self.conditions, ProgramBehaves)
        object.__setattr__(self, "conditions", conditions)

    def _json(self) -> str:
        return json.dumps({"conditions": [condition._json() for condition in self.conditions]})


@dataclass(frozen=True)
class ContentScorable:
    """A program, as text or bytes, run verbatim."""

    value: Union[str, bytes]

    def _bytes(self) -> bytes:
        return self.value.encode("utf-8") if isinstance(self.value, str) else self.value


@dataclass(frozen=True)
class DockerRuntimeProfile:
    """A Docker profile: an image pinned by digest (``repo@sha256:...``) or id
    (``sha256:...``), never a tag, and the command the program's path and
    arguments follow. Limits default as in the CLI's config.

    A compiled language gives ``source`` (the program's file name under
    ``/sandbox``), ``compile`` (run verbatim once per program, with ``/build``
    writable) and optionally ``compile_limits`` (same keys as the limits); the
    cases then run ``command`` and their arguments, with ``/build`` read-only.

    ``trace=True`` records what each case tried (under ``runtime="runsc"``;
    another runtime says it does not trace), so behaviour conditions can be
    scored."""

    image: str
    command: Sequence[str]
    runtime: Optional[str] = None
    user: Optional[str] = None
    memory: Optional[str] = None
    cpus: Optional[float] = None
    pids: Optional[int] = None
    timeout: Optional[str] = None
    cpu_time: Optional[str] = None
    output: Optional[str] = None
    tmp: Optional[str] = None
    source: Optional[str] = None
    compile: Optional[Sequence[str]] = None
    compile_limits: Optional[Mapping[str, Union[str, int, float]]] = None
    trace: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", _strings("DockerRuntimeProfile", "command", self.command))
        compile = _strings("DockerRuntimeProfile", "compile", self.compile, optional=True)
        object.__setattr__(self, "compile", compile)

    def _spec(self) -> dict[str, JsonValue]:
        spec: dict[str, JsonValue] = {
            "backend": "docker",
            "image": self.image,
            "command": list(self.command),
        }
        if self.runtime is not None:
            spec["runtime"] = self.runtime
        if self.user is not None:
            spec["user"] = self.user
        limits = {
            name: getattr(self, name)
            for name in ("memory", "cpus", "pids", "timeout", "cpu_time", "output", "tmp")
            if getattr(self, name) is not None
        }
        if limits:
            spec["limits"] = limits
        if self.source is not None:
            spec["source"] = self.source
        if self.compile is not None:
            spec["compile"] = list(self.compile)
        if self.compile_limits is not None:
            spec["compile_limits"] = dict(self.compile_limits)
        if self.trace:
            spec["trace"] = True
        return spec


# ---------------------------------------------------------------- what came back


@dataclass(frozen=True)
class CapturedStream:
    """An output stream as captured: the bytes kept, whether more were
    dropped, and how many the program wrote in all."""

    data: bytes
    truncated: bool
    total_bytes: int

    @property
    def text(self) -> str:
        """The kept bytes as text (invalid UTF-8 replaced)."""
        return self.data.decode("utf-8", errors="replace")

    @staticmethod
    def _from_json(value: Mapping[str, JsonValue]) -> CapturedStream:
        return CapturedStream(
            data=_bytes_from_json(value.get("data", "")),
            truncated=bool(value.get("truncated", False)),
            total_bytes=int(value.get("total_bytes", 0)),
        )


@dataclass(frozen=True)
class InvocationEvent:
    """What happened to one invocation. ``outcome`` is ``exited``,
    ``timed_out``, ``memory_limit``, ``compile_error``, ``sandbox_error`` or
    ``not_run``."""

    outcome: str
    exit_code: Optional[int]
    stdout_stream: CapturedStream
    stderr_stream: CapturedStream
    duration_ms: int
    cpu_ms: Optional[int] = None
    peak_memory_bytes: Optional[int] = None
    detail: Optional[str] = None
    provenance: Optional[Mapping[str, JsonValue]] = None
    behaviour: Optional[Mapping[str, JsonValue]] = None
    """What the program tried (a profile with ``trace``): ``{"status":
    "traced", "events": [...], "counts": {...}, "dropped": N}`` or
    ``{"status": "not_traced", "reason": ...}``."""

    @property
    def stdout(self) -> str:
        """Standard output as text (exact when it is UTF-8)."""
        return self.stdout_stream.text

    @property
    def stderr(self) -> str:
        """Standard error as text (exact when it is UTF-8)."""
        return self.stderr_stream.text

    @staticmethod
    def _from_json(value: Mapping[str, JsonValue]) -> InvocationEvent:
        usage = value.get("usage") or {}
        detail = value.get("message") or value.get("reason") or value.get("unconfirmed")
        return InvocationEvent(
            outcome=str(value["outcome"]),
            exit_code=value.get("exit_code"),
            stdout_stream=CapturedStream._from_json(value["stdout"]),
            stderr_stream=CapturedStream._from_json(value["stderr"]),
            duration_ms=int(value.get("duration_ms", 0)),
            cpu_ms=usage.get("cpu_ms"),
            peak_memory_bytes=usage.get("peak_memory_bytes"),
            detail=detail,
            provenance=value.get("provenance"),
            behaviour=value.get("behaviour"),
        )


@dataclass(frozen=True)
class ProgramRun:
    """One run of a program: an event per invocation, in order."""

    runtime_profile_name: str
    program_sha256: str
    events: Sequence[InvocationEvent]
    sandbox_warnings: Sequence[str] = ()
    # The compile, for profiles that build the program first.
    compile: Optional[CompileEvent] = None

    @staticmethod
    def _from_json(value: Mapping[str, JsonValue]) -> ProgramRun:
        compile = value.get("compile")
        return ProgramRun(
            runtime_profile_name=str(value["profile"]),
            program_sha256=str(value["program_sha256"]),
            events=tuple(InvocationEvent._from_json(event) for event in value["events"]),
            sandbox_warnings=tuple(value.get("sandbox_warnings", ())),
            compile=None if compile is None else CompileEvent._from_json(compile),
        )


@dataclass(frozen=True)
class CompileEvent:
    """How the program was built: the compiler's run (``event``: its outcome,
    output, duration, provenance) and the sha256 of what it built."""

    event: InvocationEvent
    artifact_sha256: Optional[str] = None

    @property
    def succeeded(self) -> bool:
        """Whether the compiler exited 0."""
        return self.event.outcome == "exited" and self.event.exit_code == 0

    @staticmethod
    def _from_json(value: Mapping[str, JsonValue]) -> CompileEvent:
        sha256 = value.get("artifact_sha256")
        return CompileEvent(
            event=InvocationEvent._from_json(value),
            artifact_sha256=None if sha256 is None else str(sha256),
        )


@dataclass(frozen=True)
class Observation:
    """Stored evidence: one run of one attempt, immutable."""

    id: str
    attempt_key: str
    runtime_profile_name: str
    program_sha256: str
    invocations: Sequence[ProgramInvocation]
    run: ProgramRun
    created_at: str
    # The stored record itself: a replay hands it back unchanged.
    _record: str = field(repr=False, compare=False)

    @staticmethod
    def _from_record(record: str) -> Observation:
        value = json.loads(record)
        return Observation(
            id=value["id"],
            attempt_key=value["attempt_key"],
            runtime_profile_name=value["profile"],
            program_sha256=value["program_sha256"],
            invocations=tuple(ProgramInvocation._from_json(i) for i in value["invocations"]),
            run=ProgramRun._from_json(value["run"]),
            created_at=value["created_at"],
            _record=record,
        )


@dataclass(frozen=True)
class CaseReport:
    """How one case went."""

    outcome: str
    matched: Optional[bool]
    duration_ms: int
    exit_code: Optional[int] = None
    detail: Optional[str] = None
    cpu_ms: Optional[int] = None
    peak_memory_bytes: Optional[int] = None
    behaviour: Optional[Mapping[str, JsonValue]] = None
    """The case's behaviour counted per kind (``{"status": "traced",
    "counts": {"net.connect": 1}}``), or why it was not traced."""
    score: Optional[float] = None
    """The case's partial score in [0, 1], when a checker gave points."""
    checker: Optional[str] = None
    """What the item's checker said of the output, when one judged it."""

    @staticmethod
    def _from_json(value: Mapping[str, JsonValue]) -> CaseReport:
        return CaseReport(
            outcome=str(value["outcome"]),
            matched=value.get("matched"),
            duration_ms=int(value.get("duration_ms", 0)),
            exit_code=value.get("exit_code"),
            detail=value.get("detail"),
            cpu_ms=value.get("cpu_ms"),
            peak_memory_bytes=value.get("peak_memory_bytes"),
            behaviour=value.get("behaviour"),
            score=value.get("score"),
            checker=value.get("checker"),
        )


@dataclass(frozen=True)
class Score:
    """A verdict: ``True``, ``False`` or ``None`` (undetermined, ``reason``
    says why), its rationale, and the evidence it rests on."""

    score_id: int
    item_id: Optional[str]
    status: str
    value: Optional[bool]
    score_rationale: str
    observation_ids: Sequence[str]
    cases: Sequence[CaseReport] = ()
    reason: Optional[str] = None
    reason_kind: Optional[str] = None
    evidence: Optional[str] = None
    score: Optional[float] = None
    """The item's score in [0, 1] under its expectation's score policy
    (``all_pass``: 1 or 0 with the value), ``None`` while undetermined."""
    groups: Sequence[Mapping[str, JsonValue]] = ()
    """Per group under the ``groups`` policy: ``name``, ``points``, ``earned``."""

    def get_value(self) -> Optional[bool]:
        """The verdict: ``True``, ``False``, or ``None`` when undetermined."""
        return self.value

    @staticmethod
    def _from_json(value: Mapping[str, JsonValue]) -> Score:
        return Score(
            score_id=int(value.get("score_id", value.get("id", 0))),
            item_id=value.get("item_id"),
            status=str(value["status"]),
            value=value.get("value"),
            score_rationale=str(value["rationale"]),
            observation_ids=list(value.get("observation_ids", ())),
            cases=tuple(CaseReport._from_json(c) for c in value.get("cases", ())),
            reason=value.get("reason"),
            reason_kind=value.get("reason_kind"),
            evidence=value.get("evidence"),
            score=value.get("score"),
            groups=tuple(value.get("groups", ())),
        )


# ---------------------------------------------------------------- the work


class _LoopWaker:
    """Tells one event loop which native tasks have ended. progscore's threads
    never call into Python (a thread that does so while the interpreter shuts
    down aborts the process): an ended task writes a byte to a socket this
    loop watches, and the loop reads the outcome on its own thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.native = _native.NativeWaker()
        self._waiting: dict[int, asyncio.Future[None]] = {}
        # The loop's selector holds this waker, not the reverse: a closed
        # loop lets both go.
        loop.add_reader(self.native.fileno(), self._wake)

    def _wake(self) -> None:
        for task_id in self.native.drain():
            ended = self._waiting.pop(task_id, None)
            if ended is not None and not ended.done():
                ended.set_result(None)

    def ended(self, task: _native.NativeTask) -> asyncio.Future[None]:
        # The wake is read on this thread, so it cannot come before this.
        ended = asyncio.get_running_loop().create_future()
        self._waiting[task.id] = ended
        return ended


_wakers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaker] = weakref.WeakKeyDictionary()


def _loop_waker() -> _LoopWaker:
    loop = asyncio.get_running_loop()
    waker = _wakers.get(loop)
    if waker is None:
        waker = _wakers[loop] = _LoopWaker(loop)
    return waker


async def _run(start: Callable[[_native.NativeWaker], _native.NativeTask]) -> str:
    """Starts native work and returns its result (JSON). If the awaiting
    asyncio task is cancelled, the work is cancelled too, and the
    cancellation completes only after the work has ended: the run's
    containers and workspaces are gone by then."""
    waker = _loop_waker()
    task = start(waker.native)
    ended = waker.ended(task)
    try:
        await asyncio.shield(ended)
    except asyncio.CancelledError:
        task.cancel()
        while not ended.done():
            try:
                await asyncio.shield(ended)
            except asyncio.CancelledError:
                # Cancelled again: still wait for the cleanup.
                continue
        raise
    return task.outcome()


class DockerSandboxClient:
    """Runs programs under named profiles: Docker (runc or gVisor) and, from a
    config, WASI. Callers choose a profile by name only."""

    def __init__(self, profiles: Mapping[str, DockerRuntimeProfile]) -> None:
        specs = {name: profile._spec() for name, profile in profiles.items()}
        self._native = _native.NativeClient.from_profiles(json.dumps(specs))

    @classmethod
    def from_config(cls, path: Union[str, os.PathLike[str]]) -> DockerSandboxClient:
        """Every profile (Docker, gVisor, WASI) and user comparator of a progscore.toml."""
        client = cls.__new__(cls)
        client._native = _native.NativeClient.from_config(os.fspath(path))
        return client

    def get_runtime_profile_names(self) -> list[str]:
        """The profiles' names, sorted."""
        return self._native.profile_names()

    @property
    def docker_owner(self) -> str | None:
        """The value of the ``progscore.owner`` label on this client's
        containers; None when no profile uses Docker."""
        return self._native.docker_owner()

    @property
    def docker_workspaces(self) -> str | None:
        """The folder holding this client's per-run workspaces (empty between
        runs); None when no profile uses Docker."""
        return self._native.docker_workspaces()

    async def execute_async(
        self,
        *,
        program: Union[str, bytes],
        runtime_profile_name: str,
        invocations: Sequence[ProgramInvocation],
    ) -> ProgramRun:
        """Runs the program once per invocation, each in a fresh sandbox."""
        invocations = _items("execute_async", "invocations", invocations, ProgramInvocation)
        data = program.encode("utf-8") if isinstance(program, str) else program
        invocations_json = json.dumps([invocation._json() for invocation in invocations])
        run = await _run(lambda waker: self._native.start_execute(waker, data, runtime_profile_name, invocations_json))
        return ProgramRun._from_json(json.loads(run))


class EvidenceStore:
    """The SQLite evidence store: the same file the CLI reads and writes."""

    def __init__(self, path: Union[str, os.PathLike[str]]) -> None:
        self._native = _native.NativeStore(os.fspath(path))

    async def get_observations_async(self, *, observation_ids: Sequence[str]) -> list[Observation]:
        """The stored observations with these ids, in order."""
        ids = list(_strings("get_observations_async", "observation_ids", observation_ids))
        records: list[str] = json.loads(await _run(lambda waker: self._native.start_observations(waker, ids)))
        return [Observation._from_record(record) for record in records]

    async def get_scores_async(
        self, *, item_id: Optional[str] = None, observation_id: Optional[str] = None
    ) -> list[Score]:
        """Stored scores, newest first, of an item or linked to an observation."""
        scores = json.loads(await _run(lambda waker: self._native.start_scores(waker, item_id, observation_id)))
        return [Score._from_json(score) for score in scores]


class ProgramExecutionSource:
    """Where a scorer's evidence comes from: the store, a run in flight, or a
    new run in the client's sandboxes."""

    def __init__(self, *, sandbox: DockerSandboxClient) -> None:
        self.sandbox = sandbox


@dataclass(frozen=True)
class ScoringItem:
    """One program to score in a batch (``score_many_async``)."""

    scorable: ContentScorable
    expectation: ScoringExpectation
    item_id: Optional[str] = None


class ProgramExecutionScorer:
    """Scores programs by what they do: validates the expectation, finds or
    makes the evidence (concurrent scores of one attempt share one run),
    applies the verdict rules and stores the score."""

    def __init__(self, *, source: ProgramExecutionSource, memory: EvidenceStore) -> None:
        self.source = source
        self.memory = memory
        self._native = _native.NativeScorer(source.sandbox._native, memory._native)

    def validate(self, expectation: ScoringExpectation) -> None:
        """Raises ``InvalidExpectationError`` for what scoring would refuse."""
        self._native.validate(expectation._json())

    async def score_async(
        self,
        *,
        scorable: ContentScorable,
        expectation: ScoringExpectation,
        item_id: Optional[str] = None,
        fresh: bool = False,
    ) -> list[Score]:
        """Scores one program (its stored evidence is reused unless ``fresh``)."""
        # An invalid expectation is refused as the work starts, before anything runs.
        program, expectation_json = scorable._bytes(), expectation._json()
        score = await _run(lambda waker: self._native.start_score(waker, program, expectation_json, item_id, fresh))
        return [Score._from_json(json.loads(score))]

    async def score_observation_async(
        self,
        *,
        observation: Observation,
        expectation: ScoringExpectation,
        item_id: Optional[str] = None,
    ) -> list[Score]:
        """Scores a stored observation against an expectation; runs nothing.
        Raises ``ReplayRefusedError`` when the observation is not stored, is
        not the stored copy, or ran another profile or other invocations."""
        expectation_json = expectation._json()
        score = await _run(lambda waker: self._native.start_replay(waker, observation._record, expectation_json, item_id))
        return [Score._from_json(json.loads(score))]

    async def rescore_async(
        self,
        *,
        scorable: ContentScorable,
        expectation: ScoringExpectation,
        item_id: Optional[str] = None,
    ) -> list[Score]:
        """Re-grades a program from stored evidence only (undetermined, "no
        stored evidence", when there is none)."""
        program, expectation_json = scorable._bytes(), expectation._json()
        rescored = await _run(lambda waker: self._native.start_rescore(waker, program, expectation_json, item_id))
        return [Score._from_json(json.loads(rescored)["score"])]

    async def score_many_async(
        self, items: Iterable[ScoringItem], *, max_concurrency: Optional[int] = None
    ) -> list[Union[Score, ProgscoreError]]:
        """Scores many programs, at most ``max_concurrency`` at once (by
        default 3 per core, as ``progscore score --jobs``); the results come
        in the items' order, a refused item as its error."""
        if max_concurrency is None:
            # The runtime's batch policy, the same as the CLI's.
            max_concurrency = self._native.default_jobs()
        gate = asyncio.Semaphore(max(1, max_concurrency))

        async def one(item: ScoringItem) -> Union[Score, ProgscoreError]:
            async with gate:
                try:
                    scores = await self.score_async(
                        scorable=item.scorable,
                        expectation=item.expectation,
                        item_id=item.item_id,
                    )
                except ProgscoreError as error:
                    return error
                return scores[0]

        return list(await asyncio.gather(*(one(item) for item in items)))
