"""Behaviour through the package: under gVisor with ``trace=True`` a connection
attempt makes ``never`` false and ``attempts`` true, naming the event; a quiet
program's complete trace makes ``never`` true; a profile that does not trace
refuses behaviour conditions before anything runs."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from progscore import (
    ContentScorable,
    DockerRuntimeProfile,
    DockerSandboxClient,
    EvidenceStore,
    InvalidExpectationError,
    ProgramBehaves,
    ProgramCase,
    ProgramExecutionScorer,
    ProgramExecutionSource,
    ProgramInvocation,
    ScoringExpectation,
)

CONNECTS = "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 443), timeout=2)\nexcept OSError:\n    pass\n"
QUIET = "print(sum(range(10)))\n"


def expect(profile: str, behaviour: dict[str, Any]) -> ScoringExpectation:
    case = ProgramCase(invocation=ProgramInvocation())
    return ScoringExpectation(
        conditions=(ProgramBehaves(runtime_profile_name=profile, cases=(case,), behaviour=behaviour),)
    )


def scorer_for(image: str, tmp_path: pathlib.Path) -> ProgramExecutionScorer:
    client = DockerSandboxClient(profiles={
        "traced": DockerRuntimeProfile(image=image, command=("python3", "-I"), runtime="runsc", trace=True),
        "python": DockerRuntimeProfile(image=image, command=("python3", "-I")),
    })
    return ProgramExecutionScorer(
        source=ProgramExecutionSource(sandbox=client), memory=EvidenceStore(tmp_path / "evidence.db")
    )


async def test_a_connection_attempt_is_traced_and_decides(image: str, tmp_path: pathlib.Path) -> None:
    scorer = scorer_for(image, tmp_path)
    program = ContentScorable(value=CONNECTS)
    never = (await scorer.score_async(scorable=program, expectation=expect("traced", {"never": ["net.connect"]})))[0]
    assert never.get_value() is False, never.score_rationale
    assert "net.connect 1.1.1.1:443" in never.score_rationale
    behaviour = never.cases[0].behaviour
    assert behaviour is not None and behaviour["status"] == "traced"
    assert behaviour["counts"]["net.connect"] == 1
    attempts = (await scorer.score_async(
        scorable=program, expectation=expect("traced", {"attempts": [{"net.connect": {"port": 443}}]})))[0]
    assert attempts.get_value() is True, attempts.score_rationale
    # The same attempt: its stored evidence is reused, not run again.
    assert attempts.observation_ids == never.observation_ids

    quiet = (await scorer.score_async(
        scorable=ContentScorable(value=QUIET),
        expectation=expect("traced", {"never": ["net.connect", "proc.exec", "fs.open"]})))[0]
    assert quiet.get_value() is True, quiet.score_rationale


async def test_behaviour_on_a_profile_that_does_not_trace_is_refused(image: str, tmp_path: pathlib.Path) -> None:
    scorer = scorer_for(image, tmp_path)
    with pytest.raises(InvalidExpectationError, match="does not trace behaviour"):
        await scorer.score_async(
            scorable=ContentScorable(value=QUIET), expectation=expect("python", {"never": ["net.connect"]}))
