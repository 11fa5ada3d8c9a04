"""Files beside a program through the package: the program reads them from
its folder (by a relative path), bytes arrive unchanged, other content is
another attempt, and a file in the program's place names its path."""

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

READER = "print(open('data/n.txt').read().strip(), open('raw.bin', 'rb').read().hex())\n"


def expect(files: dict[str, str | bytes], stdout: str) -> ScoringExpectation:
    case = ProgramCase(invocation=ProgramInvocation(), expected=ProgramResult(stdout=Equals(value=stdout)))
    return ScoringExpectation(
        conditions=(ProgramBehaves(runtime_profile_name="python", cases=(case,), files=files),)
    )


async def test_a_program_reads_the_files_beside_it(image: str, tmp_path: pathlib.Path) -> None:
    client = DockerSandboxClient(profiles={
        "python": DockerRuntimeProfile(image=image, command=("python3", "-I"), timeout="10s"),
    })
    scorer = ProgramExecutionScorer(
        source=ProgramExecutionSource(sandbox=client), memory=EvidenceStore(tmp_path / "evidence.db")
    )
    program = ContentScorable(value=READER)
    seven = (await scorer.score_async(
        scorable=program, expectation=expect({"data/n.txt": "7\n", "raw.bin": b"\x00\xff"}, "7 00ff")))[0]
    assert seven.get_value() is True, seven.score_rationale
    eight = (await scorer.score_async(
        scorable=program, expectation=expect({"data/n.txt": "8\n", "raw.bin": b"\x00\xff"}, "7 00ff")))[0]
    assert eight.get_value() is False, eight.score_rationale
    assert eight.observation_ids != seven.observation_ids

    with pytest.raises(InvalidExpectationError, match=r"file `\.\./x`"):
        await scorer.score_async(scorable=program, expectation=expect({"../x": "no"}, ""))
