"""A program's own limits through the package: the same program that fits
the profile's limits is stopped by its own, and a bad limit names its key."""

from __future__ import annotations

import pathlib

import pytest

from progscore import (
    ContentScorable,
    DockerRuntimeProfile,
    DockerSandboxClient,
    Equals,
    EvidenceStore,
    InvalidExpectationError,
    ProgramBehaves,
    ProgramCase,
    ProgramExecutionScorer,
    ProgramExecutionSource,
    ProgramInvocation,
    ProgramResult,
    ScoringExpectation,
)

SLEEPER = "import time\ntime.sleep(1.5)\nprint('woke')\n"


def expect(limits: dict[str, str | int] | None) -> ScoringExpectation:
    case = ProgramCase(invocation=ProgramInvocation(), expected=ProgramResult(stdout=Equals(value="woke")))
    return ScoringExpectation(
        conditions=(ProgramBehaves(runtime_profile_name="python", cases=(case,), limits=limits),)
    )


async def test_a_program_runs_under_its_own_limits(image: str, tmp_path: pathlib.Path) -> None:
    client = DockerSandboxClient(profiles={
        "python": DockerRuntimeProfile(image=image, command=("python3", "-I"), timeout="10s"),
    })
    scorer = ProgramExecutionScorer(
        source=ProgramExecutionSource(sandbox=client), memory=EvidenceStore(tmp_path / "evidence.db")
    )
    program = ContentScorable(value=SLEEPER)
    plain = (await scorer.score_async(scorable=program, expectation=expect(None)))[0]
    assert plain.get_value() is True, plain.score_rationale
    own = (await scorer.score_async(scorable=program, expectation=expect({"timeout": "700ms"})))[0]
    assert own.get_value() is False, own.score_rationale
    assert own.cases[0].outcome == "timed_out"
    assert own.observation_ids != plain.observation_ids

    with pytest.raises(InvalidExpectationError, match="limits.memory"):
        await scorer.score_async(scorable=program, expectation=expect({"memory": "lots"}))
