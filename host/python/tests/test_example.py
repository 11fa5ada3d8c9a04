"""The design's documentation example, as written apart from its imports."""

from __future__ import annotations

import asyncio
import os
import pathlib

import pytest

from progscore import (
    ContentScorable,
    DockerRuntimeProfile,
    DockerSandboxClient,
    Equals,
    EvidenceStore,
    ProgramBehaves,
    ProgramCase,
    ProgramExecutionScorer,
    ProgramExecutionSource,
    ProgramInvocation,
    ProgramResult,
    ScoringExpectation,
)


async def documentation_example(image: str) -> None:
    client = DockerSandboxClient(profiles={
        "python": DockerRuntimeProfile(image=image, command=("python3", "-I")),
    })
    program = "import sys\nprint(int(sys.argv[1]) ** 2)\n"
    invocation = ProgramInvocation(arguments=("3",))
    assert "python" in client.get_runtime_profile_names()
    run = await client.execute_async(program=program, runtime_profile_name="python", invocations=(invocation,))
    assert run.events[0].exit_code == 0
    assert run.events[0].stdout == "9\n"
    print(f"Direct execution: {run.events[0].stdout.strip()}")          # Direct execution: 9

    memory = EvidenceStore("evidence.db")          # the same SQLite store the CLI uses
    case = ProgramCase(invocation=invocation, expected=ProgramResult(stdout=Equals(value="9")))
    expectation = ScoringExpectation(conditions=(ProgramBehaves(runtime_profile_name="python", cases=(case,)),))
    scorer = ProgramExecutionScorer(source=ProgramExecutionSource(sandbox=client), memory=memory)
    score = (await scorer.score_async(scorable=ContentScorable(value=program), expectation=expectation))[0]
    assert score.get_value() is True
    print(f"Score: {score.get_value()} - {score.score_rationale}")
    # Score: True - All 1 case(s) produced the expected result under python.

    observation = (await memory.get_observations_async(observation_ids=score.observation_ids))[0]
    different_case = ProgramCase(invocation=invocation, expected=ProgramResult(stdout=Equals(value="8")))
    different_expectation = ScoringExpectation(
        conditions=(ProgramBehaves(runtime_profile_name="python", cases=(different_case,)),))
    replayed = (await scorer.score_observation_async(observation=observation, expectation=different_expectation))[0]
    assert replayed.get_value() is False
    assert replayed.observation_ids == score.observation_ids
    print(f"Replay: {replayed.get_value()} - {replayed.score_rationale}")
    # Replay: False - The program did not produce the expected result under python: case 0 output did not match.


async def test_the_documentation_example_prints_its_three_lines(
    image: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    await documentation_example(image)
    assert capsys.readouterr().out.splitlines() == [
        "Direct execution: 9",
        "Score: True - All 1 case(s) produced the expected result under python.",
        "Replay: False - The program did not produce the expected result under python: case 0 output did not match.",
    ]
